package machine

import (
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// exec is one command's apply: the machine, the instant it was given, and
// where its reply and outcome go.
type exec struct {
	m     *Machine
	now   int64
	write bool
	w     *resp.Writer
	out   Outcome
}

// lockKey locks key's slot and returns it with the instant to apply at:
// for a write the applied instant raised to now, for a read the later of
// the two (a read moves nothing).
func (x *exec) lockKey(key []byte) (*keyspace.Slot, int64) {
	i := slot.Of(key)
	s := x.m.keys.Lock(i)
	if x.write {
		x.m.beforeWrite(i, s)
	}
	return s, x.instant()
}

// instant is the instant to apply at; call it holding the lock of the
// slot the command works on.
func (x *exec) instant() int64 {
	if x.write {
		return x.m.advance(x.now)
	}
	return x.m.ReadInstant(x.now)
}

// limiter writes a limiter decision as the five-integer reply.
func (x *exec) limiter(res limiter.Result) {
	reply := res.Reply()
	if res.Limited {
		x.out.Limited = true
		x.out.Limit, x.out.RetryAfter = reply[1], reply[3]
	}
	x.w.Limiter(reply)
}

// journaled keeps the latest ticket of the apply; changes become durable
// in journal order, so the latest covers the earlier ones.
func (x *exec) journaled(t Ticket) {
	if t.Pending() {
		x.out.Ticket = t
	}
}

// error writes err as a RESP error.
func (x *exec) error(err error) { x.w.Error(ErrorReply(err)) }
