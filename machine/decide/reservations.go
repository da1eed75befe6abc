package decide

// ReservationCounts are the reservations made, settled and cancelled since
// the machine was made (or restored); held is what the keyspace holds, and
// the rest expired.
type ReservationCounts struct {
	Reserved, Settled, Cancelled, Held, Expired int64
}

// Reservations counts the reservations (RL.RESERVE) by how they ended.
func (m *Room) Reservations() ReservationCounts {
	c := ReservationCounts{Reserved: m.reserved.Load(), Settled: m.settled.Load(),
		Cancelled: m.cancelled.Load(), Held: int64(m.keys.Stats().Reservations)}
	c.Expired = max(c.Reserved-c.Settled-c.Cancelled-c.Held, 0)
	return c
}
