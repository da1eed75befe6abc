package machine

import (
	"sync/atomic"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
)

// The reserve room: reservations and their settles, leases, and a group's
// part of a check across groups (reserve.go, settle.go, reservation.go,
// lease*.go, part*.go).

// reserveState counts RL.RESERVE's reservations by how they ended.
type reserveState struct{ reserved, settled, cancelled atomic.Int64 }

func reserveRoom() roomHooks {
	return roomHooks{commands: func(m *Machine) []*Command {
		cmds := concat(reserveCommands(), leaseCommands(m), partCommands())
		return cmds
	}}
}

func reserveKinds() []kindRow {
	reservation := kindRow{Inline: true, Internal: true, Encode: room.EncodeAs[*ReservationState], Decode: room.DecodeTo(decodeReservation)}
	return []kindRow{
		with(reservation, keyspace.KindReservation, "ratelimit-reservation"),
		with(reservation, keyspace.KindReservationPart, "ratelimit-reservation-part"),
		with(reservation, keyspace.KindLease, "ratelimit-lease"),
		{Kind: keyspace.KindLeaseDemand, Name: "ratelimit-lease-demand", Internal: true,
			Encode: room.EncodeAs[*LeaseDemand], Decode: room.DecodeTo(decodeLeaseDemand)},
	}
}

// with is r for kind, named Name: kinds that share a state and its
// encoding.
func with(r kindRow, kind keyspace.Kind, name string) kindRow {
	r.Kind, r.Name = kind, name
	return r
}

// ReservationCounts are the reservations made, settled and cancelled since
// the machine was made (or restored); held is what the keyspace holds, and
// the rest expired.
type ReservationCounts struct {
	Reserved, Settled, Cancelled, Held, Expired int64
}

// Reservations counts the reservations (RL.RESERVE) by how they ended.
func (m *Machine) Reservations() ReservationCounts {
	c := ReservationCounts{Reserved: m.reserve.reserved.Load(), Settled: m.reserve.settled.Load(),
		Cancelled: m.reserve.cancelled.Load(), Held: int64(m.keys.Stats().Reservations)}
	c.Expired = max(c.Reserved-c.Settled-c.Cancelled-c.Held, 0)
	return c
}
