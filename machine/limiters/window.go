package limiters

import (
	"fmt"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/window"
)

func windowCommands() []room.Command[Exec] {
	limitArgs := []cmdspec.Arg{
		{Name: "key", Type: "key"},
		{Name: "limit", Type: "integer"},
		{Name: "window", Type: "integer"},
		{Name: "cost", Type: "integer", Token: "COST", Optional: true},
	}
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "sw.check", Arity: -4, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.0.0", Complexity: "O(1); O(log N) with EXACT, N the timestamps in the window",
			Summary: "Sliding window rate limiting (approximate counter, or the exact log with EXACT): replies [limited, limit, remaining, retry_after, reset_after].",
			Args:    append(limitArgs[:len(limitArgs):len(limitArgs)], cmdspec.Arg{Name: "exact", Type: "pure-token", Token: "EXACT", Optional: true})}, Decides: true, Stores: windowStores, Run: runSlidingCheck,
		Check: func(args [][]byte) string { _, bad := parseWindowRequest(args, true); return bad },
	}, {
		Spec: cmdspec.Spec{Name: "fw.check", Arity: -4, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Fixed window rate limiting, windows aligned to the Unix epoch: replies [limited, limit, remaining, retry_after, reset_after].",
			Args:    limitArgs}, Decides: true, Run: runFixedCheck,
		Check: func(args [][]byte) string { _, bad := parseWindowRequest(args, false); return bad },
	}}
}

// windowRequest is a parsed SW.CHECK or FW.CHECK.
type windowRequest struct {
	key    []byte
	params window.Params
	cost   int64
	exact  bool
}

// parseWindowRequest parses <key> <limit> <window-seconds> [COST <n>]
// [EXACT] (EXACT only when allowExact). Options are case-insensitive, in any
// order, each at most once. It returns the RESP error to send, or "".
func parseWindowRequest(args [][]byte, allowExact bool) (windowRequest, string) {
	req := windowRequest{key: args[1], cost: 1}
	limit, ok1 := resp.ParseInt(args[2])
	seconds, ok2 := resp.ParseInt(args[3])
	if !ok1 || !ok2 {
		return req, resp.ErrNotInteger
	}
	options := "COST <n>"
	if allowExact {
		options = "COST <n> and EXACT"
	}
	seenCost := false
	for i := 4; i < len(args); i++ {
		switch {
		case resp.EqualFold(args[i], "cost"):
			if seenCost {
				return req, resp.ErrSyntax + ": COST given more than once"
			}
			seenCost = true
			if i+1 == len(args) {
				return req, resp.ErrSyntax + ": COST needs a value"
			}
			i++
			n, ok := resp.ParseInt(args[i])
			if !ok {
				return req, resp.ErrNotInteger
			}
			req.cost = n
		case allowExact && resp.EqualFold(args[i], "exact"):
			if req.exact {
				return req, resp.ErrSyntax + ": EXACT given more than once"
			}
			req.exact = true
		default:
			return req, fmt.Sprintf("%s: unknown option '%s' (options are %s)", resp.ErrSyntax, resp.Clip(args[i], 64), options)
		}
	}
	p, err := window.NewParams(limit, seconds)
	switch {
	case err != nil:
		return req, room.ErrorReply(err)
	case req.cost < 0:
		return req, room.ErrorReply(window.ErrCost)
	case req.exact && limit > window.MaxLogLimit:
		return req, room.ErrorReply(window.ErrLogLimit)
	}
	req.params = p
	return req, ""
}

// runSlidingCheck is SW.CHECK <key> <limit> <window-seconds> [COST <n>] [EXACT].
func runSlidingCheck(x Exec, args [][]byte) {
	req, bad := parseWindowRequest(args, true)
	if bad != "" {
		x.Fail(bad)
		return
	}
	if req.exact {
		replyWindow(x, req, keyspace.KindSlidingLog, checkLog)
		return
	}
	replyWindow(x, req, keyspace.KindSlidingCounter, checkWindow[window.CounterState])
}

// runFixedCheck is FW.CHECK <key> <limit> <window-seconds> [COST <n>].
func runFixedCheck(x Exec, args [][]byte) {
	req, bad := parseWindowRequest(args, false)
	if bad != "" {
		x.Fail(bad)
		return
	}
	replyWindow(x, req, keyspace.KindFixedWindow, checkWindow[window.FixedState])
}

// replyWindow runs one check and writes its reply.
func replyWindow(x Exec, req windowRequest, kind keyspace.Kind,
	check func(Exec, windowRequest, keyspace.Kind) (limiter.Result, error)) {
	res, err := check(x, req, kind)
	if err != nil {
		x.Error(err)
		return
	}
	x.Limiter(res)
}

// windowState is a window algorithm's per-key state; the keyspace holds a
// *S for a key of the algorithm's kind.
type windowState[S any] interface {
	Check(exists bool, now int64, p window.Params, cost int64) (S, bool, int64, limiter.Result, error)
}

// checkWindow runs one check on key under its slot lock for the window
// kinds whose state always fits their record (sliding counter, fixed
// window): the record's state is replaced and its expiry moved when units
// are admitted, created only then, and left untouched otherwise. Sliding
// logs, which can outgrow a record, go through checkLog.
func checkWindow[S windowState[S]](x Exec, req windowRequest, kind keyspace.Kind) (limiter.Result, error) {
	s, now := x.LockKey(req.key)
	defer x.Unlock(s)
	e, found, err := s.GetKind(req.key, kind, now)
	if err != nil {
		return limiter.Result{}, err
	}
	var old S
	if found {
		if old, err = WindowStateOf[S](s, e); err != nil {
			return limiter.Result{}, err
		}
	}
	next, store, expireAt, res, err := old.Check(found, now, req.params, req.cost)
	if err != nil || !store {
		return res, err
	}
	return res, StoreInline(s, req.key, kind, e, found, expireAt, &next)
}

// Sliding logs live in their record while their encoding fits one (a log
// of a few admissions: most keys of a small limit), decoded into the
// apply's scratch and written back; a log that outgrows its record becomes
// an object and stays one (no churn for a key around the size).

// checkLog is checkWindow for sliding logs.
func checkLog(x Exec, req windowRequest, kind keyspace.Kind) (limiter.Result, error) {
	s, now := x.LockKey(req.key)
	defer x.Unlock(s)
	e, found, err := s.GetKind(req.key, kind, now)
	if err != nil {
		return limiter.Result{}, err
	}
	var old window.LogState
	switch {
	case found && e.Inline():
		if err := x.Scratch().Log.DecodeReusing(s.State(e)); err != nil {
			return limiter.Result{}, err
		}
		old = x.Scratch().Log
	case found:
		stored, ok := s.Object(e).(*window.LogState)
		if !ok || stored == nil {
			return limiter.Result{}, window.ErrCorrupt
		}
		old = *stored
	}
	next, store, expireAt, res, err := old.Check(found, now, req.params, req.cost)
	if err != nil || !store {
		return res, err
	}
	if err := StoreLog(s, req.key, e, found, &next, expireAt, &x.Scratch().Enc); err != nil {
		return limiter.Result{}, err
	}
	if found && e.Inline() {
		// next's arrays are the scratch's, or larger ones it grew: keep
		// them for the next decode (the record holds its own copy).
		x.Scratch().Log = next
	}
	return res, nil
}

// LogFitsRecord reports whether st's encoding fits a record.
func LogFitsRecord(st *window.LogState) bool {
	var buf [keyspace.MaxInlineState + 1]byte
	return len(st.AppendBinary(buf[:0])) <= keyspace.MaxInlineState
}

// StoreLog writes a sliding log's new state: in place into its object,
// into its record when it fits one (enc is the encoding's buffer), else as
// a new object that shares no memory with next.
func StoreLog(s *keyspace.Slot, key []byte, e keyspace.Entry, found bool, next *window.LogState, expireAt int64, enc *[]byte) error {
	return StoreLogOr(s, key, e, found, next, expireAt, enc, nil)
}

// StoreLogOr is StoreLog; fault, when set (tests), fails the insert of a
// log that left its record.
func StoreLogOr(s *keyspace.Slot, key []byte, e keyspace.Entry, found bool, next *window.LogState, expireAt int64, enc *[]byte, fault func() error) error {
	if found && !e.Inline() {
		stored, ok := s.Object(e).(*window.LogState)
		if !ok || stored == nil {
			return window.ErrCorrupt
		}
		*stored = *next
		s.SetWord(e, expireAt)
		return nil
	}
	*enc = next.AppendBinary((*enc)[:0])
	if len(*enc) <= keyspace.MaxInlineState {
		if !found {
			_, err := s.InsertState(key, keyspace.KindSlidingLog, expireAt, *enc)
			return err
		}
		e, err := s.SetState(e, *enc)
		if err != nil {
			return err
		}
		s.SetWord(e, expireAt)
		return nil
	}
	obj := next.Clone()
	if found {
		s.Delete(e)
	}
	if fault != nil {
		if err := fault(); err != nil {
			return err
		}
	}
	_, err := s.Insert(key, keyspace.KindSlidingLog, expireAt, &obj)
	return err
}

// windowStores is SW.CHECK's Stores: an exact log grows by each request it
// admits; a counter stores only when its key is new.
func windowStores(keys room.View, args [][]byte, now int64) bool {
	for _, a := range args[4:] {
		if resp.EqualFold(a, "exact") {
			return true
		}
	}
	return !keys.Exists(args[1], now)
}
