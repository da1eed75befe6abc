package machine

import (
	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/conc"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/resp"
)

// The CONC.* commands keep a key's leases in its record while they fit
// (decoded into the apply's scratch, changed, encoded back), else as one
// *conc.Leases, mutated in place. The
// key's expiry word is always the end of its latest lease, so the key
// disappears (on access or by the sweep) exactly when it holds no live
// lease, and PTTL answers how long that is.

func concCommands() []*Command {
	return []*Command{{
		Spec: cmdspec.Spec{Name: "conc.acquire", Arity: 5, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.0.0", Complexity: "O(N) where N is the number of leases the key holds",
			Summary: "Takes a concurrency lease for a request id: replies [limited, limit, remaining, retry_after, reset_after].",
			Args: []Arg{
				{Name: "key", Type: "key"},
				{Name: "limit", Type: "integer"},
				{Name: "lease-seconds", Type: "integer"},
				{Name: "request-id", Type: "string"},
			}}, Decides: true, stores: alwaysStores, run: runConcAcquire, check: func(_ *Machine, args [][]byte) string { _, bad := parseAcquire(args); return bad },
	}, {
		Spec: cmdspec.Spec{Name: "conc.release", Arity: 3, Flags: []string{"write", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.0.0", Complexity: "O(N) where N is the number of leases the key holds",
			Summary: "Ends the lease of a request id: 1 if a live lease was released, 0 if none was held.",
			Args: []Arg{
				{Name: "key", Type: "key"},
				{Name: "request-id", Type: "string"},
			}}, run: runConcRelease, check: func(_ *Machine, args [][]byte) string { return checkRequestID(args[2]) },
	}, {
		Spec: cmdspec.Spec{Name: "conc.renew", Arity: 4, Flags: []string{"write", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.0.0", Complexity: "O(N) where N is the number of leases the key holds",
			Summary: "Extends the lease of a request id to end lease-seconds from now: 1 if extended, 0 if it no longer exists.",
			Args: []Arg{
				{Name: "key", Type: "key"},
				{Name: "request-id", Type: "string"},
				{Name: "lease-seconds", Type: "integer"},
			}}, run: runConcRenew, check: func(_ *Machine, args [][]byte) string { _, bad := parseRenew(args); return bad },
	}, {
		Spec: cmdspec.Spec{Name: "conc.get", Arity: 2, Flags: []string{"readonly", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Describes a concurrency key: [live leases, seconds until the next lease ends, seconds until the last ends].",
			Args:    []Arg{{Name: "key", Type: "key"}}}, run: runConcGet,
	}}
}

// leaseNanos converts lease-seconds to nanoseconds, or returns the error
// reply: a non-positive lease is refused as such, not as an overflow.
func leaseNanos(sec int64) (int64, string) {
	if sec <= 0 {
		return 0, ErrorReply(conc.ErrLeaseNotPositive)
	}
	ns, ok := resp.SecondsToNanos(sec)
	if !ok {
		return 0, resp.ErrOverflow
	}
	return ns, ""
}

// checkRequestID refuses an id no lease could hold, so that every CONC
// command answers the same way to it.
func checkRequestID(id []byte) string {
	if len(id) > conc.MaxRequestIDLen {
		return ErrorReply(conc.ErrRequestIDTooLong)
	}
	return ""
}

// leasesAt finds key's leases under the slot lock: nil when the key is
// missing (or held no live lease, which the keyspace treats alike). Leases
// kept in the key's record are decoded into x's scratch, their ids
// borrowed from the record: change them and store them with storeLeases
// before anything else writes to the slot.
func (x *exec) leasesAt(s *keyspace.Slot, key []byte, now int64) (keyspace.Entry, *conc.Leases, error) {
	e, found, err := s.GetKind(key, keyspace.KindLeases, now)
	if err != nil || !found {
		return e, nil, err
	}
	if e.Inline() {
		if err := x.bufs.leases.DecodeBorrowed(s.State(e)); err != nil {
			return e, nil, err
		}
		return e, &x.bufs.leases, nil
	}
	l, ok := s.Object(e).(*conc.Leases)
	if !ok || l == nil {
		return e, nil, conc.ErrCorrupt
	}
	return e, l, nil
}

// storeLeases records what a mutation left: the key's expiry becomes the
// end of its latest lease, or the key goes when none is live. Leases whose
// encoding fits a record live there (most keys hold a few leases: a record
// costs their bytes, an object several times that); more become an object
// that owns its ids, and stay one (no churn for a key around the size).
func (x *exec) storeLeases(s *keyspace.Slot, key []byte, e keyspace.Entry, found bool, l *conc.Leases, now int64) error {
	if l.Empty(now) {
		if found {
			s.Delete(e)
		}
		return nil
	}
	if found && !e.Inline() {
		s.SetWord(e, l.ExpireAt())
		return nil
	}
	x.bufs.enc = l.AppendBinary(x.bufs.enc[:0])
	if len(x.bufs.enc) <= keyspace.MaxInlineState {
		if !found {
			_, err := s.InsertState(key, keyspace.KindLeases, l.ExpireAt(), x.bufs.enc)
			return err
		}
		e, err := s.SetState(e, x.bufs.enc)
		if err != nil {
			return err
		}
		s.SetWord(e, l.ExpireAt())
		return nil
	}
	own, err := conc.DecodeLeases(x.bufs.enc)
	if err != nil {
		return err
	}
	if found {
		s.Delete(e)
	}
	_, err = s.Insert(key, keyspace.KindLeases, own.ExpireAt(), &own)
	return err
}

// acquireRequest is a parsed CONC.ACQUIRE.
type acquireRequest struct{ limit, lease int64 }

// parseAcquire reads <key> <limit> <lease-seconds> <request-id>; it
// returns the error reply, or "".
func parseAcquire(args [][]byte) (acquireRequest, string) {
	limit, ok1 := resp.ParseInt(args[2])
	leaseSec, ok2 := resp.ParseInt(args[3])
	if !ok1 || !ok2 {
		return acquireRequest{}, resp.ErrNotInteger
	}
	switch {
	case limit <= 0:
		return acquireRequest{}, ErrorReply(conc.ErrLimitNotPositive)
	case limit > conc.MaxLimit:
		return acquireRequest{}, ErrorReply(conc.ErrLimitTooLarge)
	}
	lease, msg := leaseNanos(leaseSec)
	if msg == "" {
		msg = checkRequestID(args[4])
	}
	return acquireRequest{limit: limit, lease: lease}, msg
}

// parseRenew reads <key> <request-id> <lease-seconds>: the lease in ns,
// or the error reply.
func parseRenew(args [][]byte) (int64, string) {
	leaseSec, ok := resp.ParseInt(args[3])
	if !ok {
		return 0, resp.ErrNotInteger
	}
	lease, msg := leaseNanos(leaseSec)
	if msg == "" {
		msg = checkRequestID(args[2])
	}
	return lease, msg
}

// runConcAcquire is CONC.ACQUIRE <key> <limit> <lease-seconds> <request-id>.
func runConcAcquire(x *exec, args [][]byte) {
	req, msg := parseAcquire(args)
	if msg != "" {
		x.fail(msg)
		return
	}
	limit, lease := req.limit, req.lease
	key, id := args[1], args[4]
	s, now := x.lockKey(key)
	e, l, err := x.leasesAt(s, key, now)
	if err != nil {
		x.unlock(s)
		x.error(err)
		return
	}
	// A fresh key always has a free slot, so the only refusal there is an
	// error, and then nothing is created.
	found := l != nil
	if !found {
		x.bufs.leases.Reset()
		l = &x.bufs.leases
	}
	res, err := l.Acquire(now, limit, lease, id)
	if err == nil {
		err = x.storeLeases(s, key, e, found, l, now)
	}
	x.unlock(s)
	if err != nil {
		x.error(err)
		return
	}
	x.limiter(res)
}

// runConcRelease is CONC.RELEASE <key> <request-id>.
func runConcRelease(x *exec, args [][]byte) {
	key, id := args[1], args[2]
	if msg := checkRequestID(id); msg != "" {
		x.fail(msg)
		return
	}
	s, now := x.lockKey(key)
	e, l, err := x.leasesAt(s, key, now)
	released := false
	if l != nil {
		released = l.Release(now, id)
		err = x.storeLeases(s, key, e, true, l, now)
	}
	x.unlock(s)
	if err != nil {
		x.error(err)
		return
	}
	x.w.Int(replyFlag(released))
}

// runConcRenew is CONC.RENEW <key> <request-id> <lease-seconds>.
func runConcRenew(x *exec, args [][]byte) {
	key, id := args[1], args[2]
	lease, msg := parseRenew(args)
	if msg != "" {
		x.fail(msg)
		return
	}
	s, now := x.lockKey(key)
	e, l, err := x.leasesAt(s, key, now)
	renewed := false
	if l != nil {
		renewed, err = l.Renew(now, id, lease)
		if err == nil {
			err = x.storeLeases(s, key, e, true, l, now)
		}
	}
	x.unlock(s)
	if err != nil {
		x.error(err)
		return
	}
	x.w.Int(replyFlag(renewed))
}

// runConcGet is CONC.GET <key>: [live leases, seconds until the next lease
// ends, seconds until the last ends], -1 for the durations when none is
// live. It reads without pruning, so it never changes the key.
func runConcGet(x *exec, args [][]byte) {
	key := args[1]
	s, now := x.lockKey(key)
	_, l, err := x.leasesAt(s, key, now)
	var live int
	var untilNext, untilLast int64
	if l != nil {
		live, untilNext, untilLast = l.View(now)
	}
	x.unlock(s)
	if err != nil {
		x.error(err)
		return
	}
	next, last := int64(-1), int64(-1)
	if live > 0 {
		next, last = limiter.Seconds(untilNext), limiter.Seconds(untilLast)
	}
	x.w.Array(3)
	x.w.Int(int64(live))
	x.w.Int(next)
	x.w.Int(last)
}
