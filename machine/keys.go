package machine

import (
	"strconv"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

func keyCommands() []*Command {
	key := []Arg{{Name: "key", Type: "key"}}
	keys := []Arg{{Name: "key", Type: "key", Multiple: true}}
	return []*Command{
		{Name: "del", Arity: -2, Flags: []string{"write"}, FirstKey: 1, LastKey: -1, Step: 1,
			Group: "generic", Since: "1.0.0", Complexity: "O(N)", Summary: "Deletes keys.", Args: keys, run: runDel, KeyFlags: []string{"RM", "DELETE"},
			Tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}},
		{Name: "unlink", Arity: -2, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: -1, Step: 1,
			Group: "generic", Since: "4.0.0", Complexity: "O(N)", Summary: "Deletes keys.", Args: keys, run: runDel, KeyFlags: []string{"RM", "DELETE"},
			Tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}},
		{Name: "exists", Arity: -2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: -1, Step: 1,
			Group: "generic", Since: "1.0.0", Complexity: "O(N)", Summary: "Counts the given keys that exist.", Args: keys, run: runExists, KeyFlags: []string{"RO"},
			Tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}},
		{Name: "ttl", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "generic", Since: "1.0.0", Complexity: "O(1)", Summary: "Returns a key's time to live in seconds.", Args: key, run: runTTL},
		{Name: "pttl", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "generic", Since: "2.6.0", Complexity: "O(1)", Summary: "Returns a key's time to live in milliseconds.", Args: key, run: runTTL},
		{Name: "type", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "generic", Since: "1.0.0", Complexity: "O(1)", Summary: "Returns the kind of limiter a key holds.", Args: key, run: runType, KeyFlags: []string{"RO"}},
		{Name: "get", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "string", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Returns a CL.THROTTLE key's theoretical arrival time in Unix nanoseconds, as redis-cell stores it.", Args: key, run: runGet},
	}
}

func runDel(x *exec, args [][]byte) {
	n := int64(0)
	for _, key := range args[1:] {
		s, now := x.lockKey(key)
		if e, ok := s.Get(key, now); ok {
			if Journaled(e.Kind()) {
				x.journaled(x.m.deleted(key))
			}
			if e.Kind() == keyspace.KindRules {
				x.m.ruleState.Store(nil)
			}
			s.Delete(e)
			n++
		}
		x.unlock(s)
	}
	x.w.Int(n)
}

func runExists(x *exec, args [][]byte) {
	n := int64(0)
	for _, key := range args[1:] {
		s, now := x.lockKey(key)
		if _, ok := s.Get(key, now); ok {
			n++
		}
		x.unlock(s)
	}
	x.w.Int(n)
}

// runTTL is TTL and PTTL: -2 for a missing key, -1 for one without expiry.
func runTTL(x *exec, args [][]byte) {
	key := args[1]
	s, now := x.lockKey(key)
	e, ok := s.Get(key, now)
	var exp int64
	if ok {
		exp = s.ExpireAt(e)
	}
	x.unlock(s)
	switch {
	case !ok:
		x.w.Int(-2)
	case exp == 0:
		x.w.Int(-1)
	default:
		ms := (exp - now) / 1_000_000
		if resp.EqualFold(args[0], "ttl") {
			// Redis rounds the remaining milliseconds to the nearest second.
			x.w.Int((ms + 500) / 1000)
			return
		}
		x.w.Int(ms)
	}
}

func runType(x *exec, args [][]byte) {
	key := args[1]
	s, now := x.lockKey(key)
	e, ok := s.Get(key, now)
	x.unlock(s)
	if !ok {
		x.w.Simple("none")
		return
	}
	x.w.Simple(KindName(e.Kind()))
}

// runGet answers GET on a CL.THROTTLE key with its stored TAT, as redis-cell
// does; other kinds are not strings.
func runGet(x *exec, args [][]byte) {
	key := args[1]
	s, now := x.lockKey(key)
	e, ok, err := s.GetKind(key, keyspace.KindGCRA, now)
	var tat int64
	if ok {
		tat = s.Word(e)
	}
	x.unlock(s)
	switch {
	case err != nil:
		x.error(err)
	case !ok:
		x.w.Null()
	default:
		x.w.BulkString(strconv.FormatInt(tat, 10))
	}
}

func serverKeyCommands() []*Command {
	return []*Command{
		{Name: "dbsize", slots: allSlots, Arity: 1, Flags: []string{"readonly", "fast"}, Group: "server", Since: "1.0.0",
			Summary: "Returns the number of keys.", Complexity: "O(N): sluice counts live keys exactly", run: runDBSize,
			Tips: []string{"request_policy:all_shards", "response_policy:agg_sum"}, ACLCategories: []string{"@keyspace"}},
		{Name: "flushall", slots: allSlots, Arity: -1, Flags: []string{"write"}, Group: "server", Since: "1.0.0",
			Summary: "Removes all keys.", Complexity: "O(N)",
			Tips: []string{"request_policy:all_shards", "response_policy:all_succeeded"}, ACLCategories: []string{"@keyspace", "@dangerous"},
			Args: flushArgs, run: runFlush, check: checkFlush},
		{Name: "flushdb", slots: allSlots, Arity: -1, Flags: []string{"write"}, Group: "server", Since: "1.0.0",
			Summary: "Removes all keys.", Complexity: "O(N)",
			Tips: []string{"request_policy:all_shards", "response_policy:all_succeeded"}, ACLCategories: []string{"@keyspace", "@dangerous"},
			Args: flushArgs, run: runFlush, check: checkFlush},
	}
}

var flushArgs = []Arg{{Name: "flush-type", Type: "oneof", Optional: true, Sub: []Arg{
	{Name: "async", Type: "pure-token", Token: "ASYNC"},
	{Name: "sync", Type: "pure-token", Token: "SYNC"},
}}}

// runDBSize counts the keys live at the read instant: exact, so replicas
// answer alike whatever each has swept.
func runDBSize(x *exec, _ [][]byte) {
	if x.group != nil {
		x.w.Int(int64(x.m.keys.LiveLocked(x.m.ReadInstant(x.now))))
		return
	}
	x.w.Int(int64(x.m.keys.Live(x.m.ReadInstant(x.now))))
}

// checkFlush allows FLUSHALL and FLUSHDB an optional SYNC or ASYNC.
func checkFlush(_ *Machine, args [][]byte) string {
	if len(args) > 2 || (len(args) == 2 && !resp.EqualFold(args[1], "sync") && !resp.EqualFold(args[1], "async")) {
		return resp.ErrSyntax
	}
	return ""
}

func runFlush(x *exec, args [][]byte) {
	if bad := checkFlush(x.m, args); bad != "" {
		x.w.Error(bad)
		return
	}
	x.flushAll()
	x.w.OK()
}

// flushAll drops every key, journaling the flush while every slot is
// locked so it is ordered exactly among the quota changes around it. The
// loaded rules are configuration, not data: they are put back.
func (x *exec) flushAll() {
	defer func() {
		// The rules and the slots owned are configuration, not data.
		if st := x.m.ruleState.Load(); st != nil {
			x.setRules(st)
		}
		if o := x.m.owned.Load(); o != nil {
			x.setOwnership(o)
		}
		if l := x.m.groups.Load(); l != nil {
			s, _ := x.lockKey([]byte(GroupsKey))
			x.setGroups(s, l)
			x.unlock(s)
		}
	}()
	var t Ticket
	before := func(slots func(i int) *keyspace.Slot) {
		for i := range slot.Count {
			x.m.beforeWrite(i, slots(i))
		}
		x.instant()
		if x.m.durable != nil {
			t = x.m.durable.Flushed()
		}
	}
	if x.group != nil {
		x.m.keys.FlushAllLocked(before) // the transaction holds every slot
	} else {
		x.m.keys.FlushAll(before)
	}
	x.journaled(t)
}

func (m *Machine) quotaChanged(key []byte, st *quota.State) Ticket {
	if m.durable == nil {
		return Ticket{}
	}
	return m.durable.QuotaChanged(key, st)
}

// changed journals the new state of a key of a journaled kind other than
// quota.
func (m *Machine) changed(key []byte, kind keyspace.Kind, expireAt int64, obj any) Ticket {
	if m.durable == nil {
		return Ticket{}
	}
	state, err := EncodeState(nil, kind, obj)
	if err != nil {
		panic(err) // a kind and its own state type: a bug if they disagree
	}
	return m.durable.RecordChanged(key, kind, expireAt, state)
}

func (m *Machine) deleted(key []byte) Ticket {
	if m.durable == nil {
		return Ticket{}
	}
	return m.durable.QuotaDeleted(key)
}
