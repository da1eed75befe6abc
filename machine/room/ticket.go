package room

// DurableWaiter is what a Ticket waits on.
type DurableWaiter interface {
	// Wait blocks until change seq is as durable as a reply requires.
	Wait(seq uint64) error
}

// Ticket is a journaled change that a reply may have to wait for. The zero
// Ticket has nothing to wait for.
type Ticket struct {
	w   DurableWaiter
	seq uint64
}

// NewTicket is the ticket for change seq of w; seq 0 needs no wait.
func NewTicket(w DurableWaiter, seq uint64) Ticket {
	if seq == 0 {
		return Ticket{}
	}
	return Ticket{w: w, seq: seq}
}

// Pending reports whether there is something to wait for.
func (t Ticket) Pending() bool { return t.w != nil }

// Wait blocks until the change is durable.
func (t Ticket) Wait() error {
	if t.w == nil {
		return nil
	}
	return t.w.Wait(t.seq)
}
