package commands

import (
	"github.com/sluice-rl/sluice/gcra"
	"github.com/sluice-rl/sluice/keyspace"
)

func gcraCommands() []*Command {
	return []*Command{{
		Name: "cl.throttle", Arity: -5, Flags: []string{"write", "denyoom", "fast"},
		FirstKey: 1, LastKey: 1, Step: 1,
		Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
		Summary: "GCRA rate limiting, as redis-cell: replies [limited, limit, remaining, retry_after, reset_after].",
		Args: []Arg{
			{Name: "key", Type: "key"},
			{Name: "max_burst", Type: "integer"},
			{Name: "count", Type: "integer"},
			{Name: "period", Type: "integer"},
			{Name: "quantity", Type: "integer", Optional: true},
		},
		Run: runThrottle,
	}}
}

// runThrottle is CL.THROTTLE <key> <max_burst> <count per period> <period> [<quantity>].
func runThrottle(c *Ctx, args [][]byte) {
	if len(args) > 6 {
		c.W.Error(errArity("cl.throttle"))
		return
	}
	burst, ok1 := parseInt(args[2])
	count, ok2 := parseInt(args[3])
	period, ok3 := parseInt(args[4])
	quantity, ok4 := int64(1), true
	if len(args) == 6 {
		quantity, ok4 = parseInt(args[5])
	}
	if !ok1 || !ok2 || !ok3 || !ok4 {
		c.W.Error(errNotInteger)
		return
	}
	periodNs, ok := secondsToNanos(period)
	if !ok {
		c.W.Error(errOverflow)
		return
	}
	limit := gcra.Limit{MaxBurst: burst, Count: count, Period: periodNs}
	if err := limit.Validate(); err != nil {
		c.W.Error(errorReply(err))
		return
	}
	key := args[1]
	s, now := c.Env.Keys.LockKey(key, c.Now())
	e, found, err := s.GetKind(key, keyspace.KindGCRA, now)
	if err != nil {
		s.Unlock()
		c.W.Error(errorReply(err))
		return
	}
	var tat int64
	if found {
		tat = s.Word(e)
	}
	newTAT, store, res, err := gcra.Throttle(tat, found, now, limit, quantity)
	if err == nil && store {
		if found {
			s.SetWord(e, newTAT)
		} else {
			_, err = s.Insert(key, keyspace.KindGCRA, newTAT, nil)
		}
	}
	s.Unlock()
	if err != nil {
		c.W.Error(errorReply(err))
		return
	}
	c.limiterReply(res)
}
