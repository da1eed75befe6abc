package commands

import (
	"strconv"

	"github.com/sluice-rl/sluice/keyspace"
)

func keyCommands() []*Command {
	key := []Arg{{Name: "key", Type: "key"}}
	keys := []Arg{{Name: "key", Type: "key", Multiple: true}}
	return []*Command{
		{Name: "del", Arity: -2, Flags: []string{"write"}, FirstKey: 1, LastKey: -1, Step: 1,
			Group: "generic", Since: "1.0.0", Complexity: "O(N)", Summary: "Deletes keys.", Args: keys, Run: runDel, KeyFlags: []string{"RM", "DELETE"},
			Tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}},
		{Name: "unlink", Arity: -2, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: -1, Step: 1,
			Group: "generic", Since: "4.0.0", Complexity: "O(N)", Summary: "Deletes keys.", Args: keys, Run: runDel, KeyFlags: []string{"RM", "DELETE"},
			Tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}},
		{Name: "exists", Arity: -2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: -1, Step: 1,
			Group: "generic", Since: "1.0.0", Complexity: "O(N)", Summary: "Counts the given keys that exist.", Args: keys, Run: runExists, KeyFlags: []string{"RO"},
			Tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}},
		{Name: "ttl", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "generic", Since: "1.0.0", Complexity: "O(1)", Summary: "Returns a key's time to live in seconds.", Args: key, Run: runTTL},
		{Name: "pttl", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "generic", Since: "2.6.0", Complexity: "O(1)", Summary: "Returns a key's time to live in milliseconds.", Args: key, Run: runTTL},
		{Name: "type", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "generic", Since: "1.0.0", Complexity: "O(1)", Summary: "Returns the kind of limiter a key holds.", Args: key, Run: runType, KeyFlags: []string{"RO"}},
		{Name: "get", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "string", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Returns a CL.THROTTLE key's theoretical arrival time in Unix nanoseconds, as redis-cell stores it.", Args: key, Run: runGet},
	}
}

func runDel(c *Ctx, args [][]byte) {
	n := int64(0)
	for _, key := range args[1:] {
		s, now := c.Env.Keys.LockKey(key, c.Now())
		if e, ok := s.Get(key, now); ok {
			if e.Kind() == keyspace.KindQuota {
				c.journaled(c.Env.quotaDeleted(key))
			}
			s.Delete(e)
			n++
		}
		s.Unlock()
	}
	c.W.Int(n)
}

func runExists(c *Ctx, args [][]byte) {
	n := int64(0)
	for _, key := range args[1:] {
		s, now := c.Env.Keys.LockKey(key, c.Now())
		if _, ok := s.Get(key, now); ok {
			n++
		}
		s.Unlock()
	}
	c.W.Int(n)
}

// runTTL is TTL and PTTL: -2 for a missing key, -1 for one without expiry.
func runTTL(c *Ctx, args [][]byte) {
	key := args[1]
	s, now := c.Env.Keys.LockKey(key, c.Now())
	e, ok := s.Get(key, now)
	var exp int64
	if ok {
		exp = s.ExpireAt(e)
	}
	s.Unlock()
	switch {
	case !ok:
		c.W.Int(-2)
	case exp == 0:
		c.W.Int(-1)
	default:
		ms := (exp - now) / 1_000_000
		if equalFold(args[0], "ttl") {
			// Redis rounds the remaining milliseconds to the nearest second.
			c.W.Int((ms + 500) / 1000)
			return
		}
		c.W.Int(ms)
	}
}

func runType(c *Ctx, args [][]byte) {
	key := args[1]
	s, now := c.Env.Keys.LockKey(key, c.Now())
	e, ok := s.Get(key, now)
	s.Unlock()
	if !ok {
		c.W.Simple("none")
		return
	}
	c.W.Simple(e.Kind().String())
}

// runGet answers GET on a CL.THROTTLE key with its stored TAT, as redis-cell
// does; other kinds are not strings.
func runGet(c *Ctx, args [][]byte) {
	key := args[1]
	s, now := c.Env.Keys.LockKey(key, c.Now())
	e, ok, err := s.GetKind(key, keyspace.KindGCRA, now)
	var tat int64
	if ok {
		tat = s.Word(e)
	}
	s.Unlock()
	switch {
	case err != nil:
		c.W.Error(errorReply(err))
	case !ok:
		c.W.Null()
	default:
		c.W.BulkString(strconv.FormatInt(tat, 10))
	}
}
