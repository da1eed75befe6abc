package limiters

import (
	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/gcra"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
)

func gcraCommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "cl.throttle", Arity: -5, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
			Summary: "GCRA rate limiting, as redis-cell: replies [limited, limit, remaining, retry_after, reset_after].",
			Args: []cmdspec.Arg{
				{Name: "key", Type: "key"},
				{Name: "max_burst", Type: "integer"},
				{Name: "count", Type: "integer"},
				{Name: "period", Type: "integer"},
				{Name: "quantity", Type: "integer", Optional: true},
			}}, Decides: true, Run: runThrottle, Check: checkThrottle,
	}}
}

// throttleRequest is a parsed CL.THROTTLE.
type throttleRequest struct {
	limit    gcra.Limit
	quantity int64
}

// parseThrottle reads <key> <max_burst> <count per period> <period>
// [<quantity>]; it returns the error reply, or "".
func parseThrottle(args [][]byte) (throttleRequest, string) {
	if len(args) > 6 {
		return throttleRequest{}, resp.ErrArity("cl.throttle")
	}
	burst, ok1 := parseCellInt(args[2])
	count, ok2 := parseCellInt(args[3])
	period, ok3 := parseCellInt(args[4])
	quantity, ok4 := int64(1), true
	if len(args) == 6 {
		quantity, ok4 = parseCellInt(args[5])
	}
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return throttleRequest{}, resp.ErrNotInteger
	}
	periodNs, ok := resp.SecondsToNanos(period)
	if !ok {
		return throttleRequest{}, resp.ErrOverflow
	}
	limit := gcra.Limit{MaxBurst: burst, Count: count, Period: periodNs}
	if err := limit.Validate(); err != nil {
		return throttleRequest{}, room.ErrorReply(err)
	}
	return throttleRequest{limit: limit, quantity: quantity}, ""
}

func checkThrottle(args [][]byte) string {
	_, bad := parseThrottle(args)
	return bad
}

// runThrottle is CL.THROTTLE <key> <max_burst> <count per period> <period> [<quantity>].
func runThrottle(x Exec, args [][]byte) {
	req, bad := parseThrottle(args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	var res limiter.Result
	err := withTAT(x, args[1], func(tat int64, found bool, now int64) (newTAT int64, store bool, err error) {
		newTAT, store, res, err = gcra.Throttle(tat, found, now, req.limit, req.quantity)
		return newTAT, store, err
	})
	if err != nil {
		x.Error(err)
		return
	}
	x.Limiter(res)
}

// withTAT runs decide on key's theoretical arrival time (found false:
// none) under its slot's lock, and keeps the TAT it returns when it says
// to store it (the key expires at its TAT).
func withTAT(x Exec, key []byte, decide func(tat int64, found bool, now int64) (int64, bool, error)) error {
	s, now := x.LockKey(key)
	defer x.Unlock(s)
	e, found, err := s.GetKind(key, keyspace.KindGCRA, now)
	if err != nil {
		return err
	}
	var tat int64
	if found {
		tat = s.Word(e)
	}
	newTAT, store, err := decide(tat, found, now)
	switch {
	case err != nil || !store:
		return err
	case found:
		s.SetWord(e, newTAT)
		return nil
	}
	_, err = s.Insert(key, keyspace.KindGCRA, newTAT, nil)
	return err
}

// parseCellInt reads an integer argument as redis-cell does (Rust's
// i64::from_str): an optional '+' or '-', then decimal digits.
func parseCellInt(b []byte) (int64, bool) {
	if len(b) > 1 && b[0] == '+' && b[1] != '-' && b[1] != '+' {
		b = b[1:]
	}
	return resp.ParseInt(b)
}
