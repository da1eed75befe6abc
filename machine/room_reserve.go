package machine

import "github.com/sluice-rl/sluice/keyspace"

// The reserve room: reservations and their settles, leases, and a group's
// part of a check across groups (reserve.go, settle.go, reservation.go,
// lease*.go, part*.go).

func reserveRoom() room {
	return room{commands: func(m *Machine) []*Command {
		cmds := concat(reserveCommands(), leaseCommands(m), partCommands())
		return cmds
	}}
}

func reserveKinds() []kindRow {
	reservation := kindRow{inline: true, internal: true, encode: encodeAs[*ReservationState], decode: decodeTo(decodeReservation)}
	return []kindRow{
		with(reservation, keyspace.KindReservation, "ratelimit-reservation"),
		with(reservation, keyspace.KindReservationPart, "ratelimit-reservation-part"),
		with(reservation, keyspace.KindLease, "ratelimit-lease"),
		{kind: keyspace.KindLeaseDemand, name: "ratelimit-lease-demand", internal: true,
			encode: encodeAs[*LeaseDemand], decode: decodeTo(decodeLeaseDemand)},
	}
}

// with is r for kind, named name: kinds that share a state and its
// encoding.
func with(r kindRow, kind keyspace.Kind, name string) kindRow {
	r.kind, r.name = kind, name
	return r
}
