package limiters

import (
	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/conc"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
)

// The CONC.* commands keep a key's leases in its record while they fit
// (decoded into the apply's scratch, changed, encoded back), else as one
// *conc.Leases, mutated in place. The
// key's expiry word is always the end of its latest lease, so the key
// disappears (on access or by the sweep) exactly when it holds no live
// lease, and PTTL answers how long that is.

func concCommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "conc.acquire", Arity: 5, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.0.0", Complexity: "O(N) where N is the number of leases the key holds",
			Summary: "Takes a concurrency lease for a request id: replies [limited, limit, remaining, retry_after, reset_after].",
			Args: []cmdspec.Arg{
				{Name: "key", Type: "key"},
				{Name: "limit", Type: "integer"},
				{Name: "lease-seconds", Type: "integer"},
				{Name: "request-id", Type: "string"},
			}}, Decides: true, Stores: room.AlwaysStores, Run: runConcAcquire, Check: func(args [][]byte) string { _, bad := parseAcquire(args); return bad },
	}, {
		Spec: cmdspec.Spec{Name: "conc.release", Arity: 3, Flags: []string{"write", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.0.0", Complexity: "O(N) where N is the number of leases the key holds",
			Summary: "Ends the lease of a request id: 1 if a live lease was released, 0 if none was held.",
			Args: []cmdspec.Arg{
				{Name: "key", Type: "key"},
				{Name: "request-id", Type: "string"},
			}}, Run: runConcRelease, Check: func(args [][]byte) string { return checkRequestID(args[2]) },
	}, {
		Spec: cmdspec.Spec{Name: "conc.renew", Arity: 4, Flags: []string{"write", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.0.0", Complexity: "O(N) where N is the number of leases the key holds",
			Summary: "Extends the lease of a request id to end lease-seconds from now: 1 if extended, 0 if it no longer exists.",
			Args: []cmdspec.Arg{
				{Name: "key", Type: "key"},
				{Name: "request-id", Type: "string"},
				{Name: "lease-seconds", Type: "integer"},
			}}, Run: runConcRenew, Check: func(args [][]byte) string { _, bad := parseRenew(args); return bad },
	}, {
		Spec: cmdspec.Spec{Name: "conc.get", Arity: 2, Flags: []string{"readonly", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Describes a concurrency key: [live leases, seconds until the next lease ends, seconds until the last ends].",
			Args:    []cmdspec.Arg{{Name: "key", Type: "key"}}}, Run: runConcGet,
	}}
}

// leaseNanos converts lease-seconds to nanoseconds, or returns the error
// reply: a non-positive lease is refused as such, not as an overflow.
func leaseNanos(sec int64) (int64, string) {
	if sec <= 0 {
		return 0, room.ErrorReply(conc.ErrLeaseNotPositive)
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
		return room.ErrorReply(conc.ErrRequestIDTooLong)
	}
	return ""
}

// leasesAt finds key's leases under the slot lock: nil when the key is
// missing (or held no live lease, which the keyspace treats alike). Leases
// kept in the key's record are decoded into x's scratch, their ids
// borrowed from the record: change them and store them with storeLeases
// before anything else writes to the slot.
func leasesAt(x Exec, s *keyspace.Slot, key []byte, now int64) (keyspace.Entry, *conc.Leases, error) {
	e, found, err := s.GetKind(key, keyspace.KindLeases, now)
	if err != nil || !found {
		return e, nil, err
	}
	if e.Inline() {
		if err := x.Scratch().Leases.DecodeBorrowed(s.State(e)); err != nil {
			return e, nil, err
		}
		return e, &x.Scratch().Leases, nil
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
func storeLeases(x Exec, s *keyspace.Slot, key []byte, e keyspace.Entry, found bool, l *conc.Leases, now int64) error {
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
	x.Scratch().Enc = l.AppendBinary(x.Scratch().Enc[:0])
	if len(x.Scratch().Enc) <= keyspace.MaxInlineState {
		if !found {
			_, err := s.InsertState(key, keyspace.KindLeases, l.ExpireAt(), x.Scratch().Enc)
			return err
		}
		e, err := s.SetState(e, x.Scratch().Enc)
		if err != nil {
			return err
		}
		s.SetWord(e, l.ExpireAt())
		return nil
	}
	own, err := conc.DecodeLeases(x.Scratch().Enc)
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
		return acquireRequest{}, room.ErrorReply(conc.ErrLimitNotPositive)
	case limit > conc.MaxLimit:
		return acquireRequest{}, room.ErrorReply(conc.ErrLimitTooLarge)
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
func runConcAcquire(x Exec, args [][]byte) {
	req, msg := parseAcquire(args)
	if msg != "" {
		x.Fail(msg)
		return
	}
	limit, lease := req.limit, req.lease
	key, id := args[1], args[4]
	s, now := x.LockKey(key)
	e, l, err := leasesAt(x, s, key, now)
	if err != nil {
		x.Unlock(s)
		x.Error(err)
		return
	}
	// A fresh key always has a free slot, so the only refusal there is an
	// error, and then nothing is created.
	found := l != nil
	if !found {
		x.Scratch().Leases.Reset()
		l = &x.Scratch().Leases
	}
	res, err := l.Acquire(now, limit, lease, id)
	if err == nil {
		err = storeLeases(x, s, key, e, found, l, now)
	}
	x.Unlock(s)
	if err != nil {
		x.Error(err)
		return
	}
	x.Limiter(res)
}

// runConcRelease is CONC.RELEASE <key> <request-id>.
func runConcRelease(x Exec, args [][]byte) {
	key, id := args[1], args[2]
	if msg := checkRequestID(id); msg != "" {
		x.Fail(msg)
		return
	}
	s, now := x.LockKey(key)
	e, l, err := leasesAt(x, s, key, now)
	released := false
	if l != nil {
		released = l.Release(now, id)
		err = storeLeases(x, s, key, e, true, l, now)
	}
	x.Unlock(s)
	if err != nil {
		x.Error(err)
		return
	}
	x.Reply().Flag((released))
}

// runConcRenew is CONC.RENEW <key> <request-id> <lease-seconds>.
func runConcRenew(x Exec, args [][]byte) {
	key, id := args[1], args[2]
	lease, msg := parseRenew(args)
	if msg != "" {
		x.Fail(msg)
		return
	}
	s, now := x.LockKey(key)
	e, l, err := leasesAt(x, s, key, now)
	renewed := false
	if l != nil {
		renewed, err = l.Renew(now, id, lease)
		if err == nil {
			err = storeLeases(x, s, key, e, true, l, now)
		}
	}
	x.Unlock(s)
	if err != nil {
		x.Error(err)
		return
	}
	x.Reply().Flag((renewed))
}

// runConcGet is CONC.GET <key>: [live leases, seconds until the next lease
// ends, seconds until the last ends], -1 for the durations when none is
// live. It reads without pruning, so it never changes the key.
func runConcGet(x Exec, args [][]byte) {
	key := args[1]
	s, now := x.LockKey(key)
	_, l, err := leasesAt(x, s, key, now)
	var live int
	var untilNext, untilLast int64
	if l != nil {
		live, untilNext, untilLast = l.View(now)
	}
	x.Unlock(s)
	if err != nil {
		x.Error(err)
		return
	}
	next, last := int64(-1), int64(-1)
	if live > 0 {
		next, last = limiter.Seconds(untilNext), limiter.Seconds(untilLast)
	}
	x.Reply().Array(3)
	x.Reply().Int(int64(live))
	x.Reply().Int(next)
	x.Reply().Int(last)
}
