package decide

import (
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/gcra"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
	"github.com/sluice-rl/sluice/window"
)

// RL.CHECKALL is RL.CHECK for callers without a rules file: the limits are
// spelled out in the command, any kinds, on keys that share a slot.

func (m *Room) checkAllCommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "rl.checkall", Arity: -5, Flags: []string{"write", "denyoom", "fast", "movablekeys"},
			Group: "sluice", Since: "1.1.0", Complexity: "O(N) where N is the number of limits",
			Summary: "Checks several limits at one instant and charges all or none: [COST n] LIMIT <key> GCRA <max_burst> <count> <period> | FIXED|SLIDING|SLIDING-EXACT <limit> <window> | QUOTA <limit> <period> [ANCHOR s] [TZ zone] ...; replies as RL.CHECK, naming the binding key.",
			Args: []cmdspec.Arg{
				{Name: "cost", Type: "integer", Token: "COST", Optional: true},
				{Name: "limit", Type: "block", Token: "LIMIT", Multiple: true, Sub: []cmdspec.Arg{
					{Name: "key", Type: "key"},
					{Name: "algorithm", Type: "string"},
					{Name: "param", Type: "string", Multiple: true},
				}},
			}}, Decides: true, Run: m.run(runCheckAll), Keys: checkAllKeys,
		Check: func(args [][]byte) string {
			var buf [4]limitCheck
			_, _, bad := m.parseCheckAll(args, buf[:0])
			return bad
		},
	}}
}

// parseCheckAll reads [COST <n>] LIMIT <key> <algorithm> <params…> [LIMIT …]
// into checks (appended to buf); it returns the error reply, or "".
func (m *Room) parseCheckAll(args [][]byte, buf []limitCheck) (int64, []limitCheck, string) {
	cost := int64(1)
	i := 1
	if resp.EqualFold(args[i], "cost") {
		n, ok := resp.ParseInt(args[i+1])
		if !ok {
			return 0, nil, resp.ErrNotInteger
		}
		if n < 0 {
			return 0, nil, "ERR COST must not be negative"
		}
		cost, i = n, i+2
	}
	checks := buf[:0]
	for i < len(args) {
		if !resp.EqualFold(args[i], "limit") || i+2 >= len(args) {
			return 0, nil, "ERR syntax error: expected LIMIT <key> <algorithm> <params...>"
		}
		if len(checks) == maxLimits {
			return 0, nil, "ERR too many limits (at most 64)"
		}
		c, next, bad := m.parseLimit(args, i+1)
		if bad != "" {
			return 0, nil, bad
		}
		if len(checks) > 0 && slot.Of(c.key) != slot.Of(checks[0].key) {
			return 0, nil, "CROSSSLOT Keys in request don't hash to the same slot"
		}
		checks = append(checks, c)
		i = next
	}
	if len(checks) == 0 {
		return 0, nil, "ERR syntax error: expected LIMIT <key> <algorithm> <params...>"
	}
	return cost, checks, ""
}

// runCheckAll is RL.CHECKALL [COST <n>] LIMIT <key> <algorithm> <params…> [LIMIT …].
func runCheckAll(x *apply, args [][]byte) {
	p := x.m.plan()
	defer x.m.release(p)
	cost, checks, bad := x.m.parseCheckAll(args, p.checks)
	if bad != "" {
		clear(p.checks[:cap(p.checks)]) // what the parse appended holds arguments
		x.Fail(bad)
		return
	}
	p.cost, p.checks = cost, checks // the keys are the arguments
	v, err := x.decide(p)
	if err != nil {
		x.Error(err)
		return
	}
	x.answerCheck(x.checkResult(p.checks, v))
}

// parseLimit reads <key> <algorithm> <params…> from args[i:], up to the
// next LIMIT, and returns the check and where the next limit starts.
func (m *Room) parseLimit(args [][]byte, i int) (limitCheck, int, string) {
	c := limitCheck{key: args[i], name: view(args[i])}
	alg := args[i+1]
	end := i + 2
	for end < len(args) && !resp.EqualFold(args[end], "limit") {
		end++
	}
	params := args[i+2 : end]
	ints := func(n int) ([]int64, string) {
		if len(params) != n {
			return nil, "ERR " + string(resp.Lower(alg)) + " takes " + strconv.Itoa(n) + " parameters"
		}
		out := make([]int64, n)
		for j, p := range params {
			v, ok := resp.ParseInt(p)
			if !ok {
				return nil, resp.ErrNotInteger
			}
			out[j] = v
		}
		return out, ""
	}
	switch {
	case resp.EqualFold(alg, "gcra"):
		v, bad := ints(3)
		if bad != "" {
			return c, end, bad
		}
		period, ok := resp.SecondsToNanos(v[2])
		if !ok {
			return c, end, resp.ErrOverflow
		}
		c.kind, c.gcra = keyspace.KindGCRA, gcra.Limit{MaxBurst: v[0], Count: v[1], Period: period}
		if err := c.gcra.Validate(); err != nil {
			return c, end, room.ErrorReply(err)
		}
		c.window = v[2]
	case resp.EqualFold(alg, "fixed"), resp.EqualFold(alg, "sliding"), resp.EqualFold(alg, "sliding-exact"):
		v, bad := ints(2)
		if bad != "" {
			return c, end, bad
		}
		p, err := window.NewParams(v[0], v[1])
		if err != nil {
			return c, end, room.ErrorReply(err)
		}
		c.win, c.window = p, v[1]
		switch {
		case resp.EqualFold(alg, "fixed"):
			c.kind = keyspace.KindFixedWindow
		case resp.EqualFold(alg, "sliding"):
			c.kind = keyspace.KindSlidingCounter
		default:
			if v[0] > window.MaxLogLimit {
				return c, end, room.ErrorReply(window.ErrLogLimit)
			}
			c.kind = keyspace.KindSlidingLog
		}
	case resp.EqualFold(alg, "quota"):
		if len(params) < 2 || len(params)%2 != 0 {
			return c, end, "ERR quota takes <limit> <period> [ANCHOR <unix-seconds>] [TZ <zone>]"
		}
		limit, ok := resp.ParseInt(params[0])
		if !ok || limit < 0 {
			return c, end, "ERR quota limit must be a non-negative integer"
		}
		var anchorArg, zoneArg []byte
		for j := 2; j < len(params); j += 2 {
			switch {
			case resp.EqualFold(params[j], "anchor") && anchorArg == nil:
				anchorArg = params[j+1]
			case resp.EqualFold(params[j], "tz") && zoneArg == nil:
				zoneArg = params[j+1]
			default:
				return c, end, resp.ErrSyntax
			}
		}
		var bad string
		if c.sched, bad = m.limiters.QuotaSchedule(params[1], anchorArg, zoneArg); bad != "" {
			return c, end, bad
		}
		c.kind, c.quotaLimit = keyspace.KindQuota, limit
	default:
		return c, end, "ERR unknown algorithm '" + resp.Clip(alg, 32) + "' (want GCRA, FIXED, SLIDING, SLIDING-EXACT or QUOTA)"
	}
	return c, end, ""
}

// checkAllKeys finds RL.CHECKALL's keys: the word after each LIMIT.
func checkAllKeys(args [][]byte) []int {
	var keys []int
	i := 1
	if i+1 < len(args) && resp.EqualFold(args[i], "cost") {
		i += 2
	}
	for ; i+1 < len(args); i++ {
		if resp.EqualFold(args[i], "limit") {
			keys = append(keys, i+1)
			i++
		}
	}
	return keys
}
