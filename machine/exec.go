package machine

import (
	"errors"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/decide"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/quota"
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
	// held are the slots this apply has locked and not yet unlocked, so a
	// panic inside the apply can release them (see Machine.recovered).
	// Every slot lock a command takes goes through LockSlot and Unlock.
	held  [maxHeld]*keyspace.Slot
	nheld int
	// group, in a transaction, holds the locks of every slot the
	// transaction touches: LockSlot takes nothing, Unlock releases nothing
	// (tx.go).
	group *room.SlotLocks
	// bufs are the scratch's reused buffers.
	bufs *scratchBufs
}

// maxHeld is the most slot locks one apply holds at once (commands lock one
// slot at a time; FlushAll locks every slot itself, outside this list).
const maxHeld = 2

// LockKey locks key's slot and returns it with the instant to apply at:
// for a write the applied instant raised to now, for a read the later of
// the two (a read moves nothing). Release it with Unlock.
func (x *exec) LockKey(key []byte) (*keyspace.Slot, int64) {
	return x.LockSlot(slot.Of(key))
}

// LockSlot is LockKey for a key in slot i.
func (x *exec) LockSlot(i int) (*keyspace.Slot, int64) {
	if x.group != nil {
		s := x.group.Slot(i)
		if x.write {
			x.m.beforeWrite(i, s)
		}
		return s, x.Instant()
	}
	s := x.m.keys.Lock(i)
	if x.nheld == maxHeld {
		s.Unlock()
		panic("machine: an apply holds more than two slot locks")
	}
	x.held[x.nheld] = s
	x.nheld++
	if x.write {
		x.m.beforeWrite(i, s)
	}
	return s, x.Instant()
}

// HoldGroup locks the slots l lists, in slot order, for one decision over
// several slots (RL.CHECK's counters spread over the slots, the domain's
// overrides and scale in its own): until ReleaseGroup, LockSlot returns
// them and Unlock releases nothing. Inside a transaction, which already
// holds them, it takes nothing and reports false. Defer ReleaseGroup, so
// a panic releases them too.
func (x *exec) HoldGroup(l *room.SlotLocks) bool {
	if x.group != nil {
		return false
	}
	l.Lock()
	x.group = l
	return true
}

// ReleaseGroup releases what HoldGroup took.
func (x *exec) ReleaseGroup(l *room.SlotLocks, took bool) {
	if took {
		x.group = nil
		l.Unlock()
	}
}

// Unlock releases a slot LockSlot took.
func (x *exec) Unlock(s *keyspace.Slot) {
	if x.group != nil {
		return // the transaction releases its slots at its end
	}
	for i := x.nheld - 1; i >= 0; i-- {
		if x.held[i] == s {
			x.nheld--
			x.held[i] = x.held[x.nheld]
			x.held[x.nheld] = nil
			s.Unlock()
			return
		}
	}
	panic("machine: unlock of a slot this apply does not hold")
}

// unlockAll releases every slot the apply still holds (after a panic).
func (x *exec) unlockAll() {
	for x.nheld > 0 {
		x.nheld--
		x.held[x.nheld].Unlock()
		x.held[x.nheld] = nil
	}
}

// Instant is the instant to apply at; call it holding the lock of the
// slot the command works on.
func (x *exec) Instant() int64 {
	if x.write {
		return x.m.advance(x.now)
	}
	return x.m.ReadInstant(x.now)
}

// Limiter writes a Limiter decision as the five-integer reply.
func (x *exec) Limiter(res limiter.Result) { x.LimiterReply(res.Limited, res.Reply()) }

// LimiterReply writes a decision already in the wire form ([limited,
// limit, remaining, retry_after, reset_after], seconds).
func (x *exec) LimiterReply(limited bool, reply [5]int64) {
	if limited {
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

// Error writes err as a RESP Error; a fence's refusal is one members act
// on (Outcome.Refusal).
func (x *exec) Error(err error) {
	var fe room.FenceError
	switch {
	case errors.As(err, &fe):
		x.out.Refusal = ErrFenced
		x.FailFor(ReasonNotNow, ErrorReply(err))
	case errors.Is(err, keyspace.ErrWrongType):
		x.FailFor(ReasonWrongType, ErrorReply(err))
	default:
		x.Fail(ErrorReply(err))
	}
}

// Fail answers the error reply msg, which the outcome carries too (for a
// door that reads typed results), for a command that was wrong
// (ReasonInvalid).
func (x *exec) Fail(msg string) { x.FailFor(ReasonInvalid, msg) }

// FailFor is fail for another reason.
func (x *exec) FailFor(r Reason, msg string) {
	x.out.Err, x.out.Reason = msg, r
	x.w.Error(msg)
}

// Reply is where the command's reply is written (limiters.Exec).
func (x *exec) Reply() *resp.Writer { return x.w }

// QuotaChanged journals key's new quota state; the reply waits for it
// (limiters.Exec). Call it holding the key's slot lock.
func (x *exec) QuotaChanged(key []byte, st *quota.State) {
	x.journaled(x.m.quotaChanged(key, st))
}

// Scratch is the limiters' buffers (limiters.Exec).
func (x *exec) Scratch() *limiters.Scratch { return &x.bufs.lim }

// Refuse answers msg, the error reply of a command that was wrong, with
// why as the outcome's Refusal: an error members act on (placement.Exec).
func (x *exec) Refuse(why error, msg string) {
	x.out.Refusal = why
	x.Fail(msg)
}

// Failed reports whether the apply has answered an error (placement.Exec).
func (x *exec) Failed() bool { return x.out.Err != "" }

// Deleted journals key's deletion; the reply waits for it
// (placement.Exec). Call it holding the key's slot lock.
func (x *exec) Deleted(key []byte) { x.journaled(x.m.deleted(key)) }

// Outcome is the apply's typed result (decide.Exec).
func (x *exec) Outcome() *Outcome { return &x.out }

// Changed journals key's new record state; the reply waits for it
// (decide.Exec). Call it holding the key's slot lock.
func (x *exec) Changed(key []byte, kind keyspace.Kind, expireAt int64, obj any) {
	x.journaled(x.m.changed(key, kind, expireAt, obj))
}

// DecideScratch is the decide room's buffers (decide.Exec).
func (x *exec) DecideScratch() *decide.Scratch { return &x.bufs.dec }

// Run applies cmd, a command of this machine's table, within this apply
// (decide.Exec: RL.PART's DECIDE and APPLY).
func (x *exec) Run(cmd decide.TableCommand, args [][]byte) { cmd.(*Command).run(x, args) }
