package machine

import (
	"bytes"
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

func keyCommands() []*Command {
	key := []Arg{{Name: "key", Type: "key"}}
	keys := []Arg{{Name: "key", Type: "key", Multiple: true}}
	return []*Command{
		{Spec: cmdspec.Spec{Name: "del", Arity: -2, Flags: []string{"write"}, FirstKey: 1, LastKey: -1, Step: 1,
			Group: "generic", Since: "1.0.0", Complexity: "O(N)", Summary: "Deletes keys.", Args: keys, KeyFlags: []string{"RM", "DELETE"},
			Tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}}, run: runDel},
		{Spec: cmdspec.Spec{Name: "unlink", Arity: -2, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: -1, Step: 1,
			Group: "generic", Since: "4.0.0", Complexity: "O(N)", Summary: "Deletes keys.", Args: keys, KeyFlags: []string{"RM", "DELETE"},
			Tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}}, run: runDel},
		{Spec: cmdspec.Spec{Name: "exists", Arity: -2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: -1, Step: 1,
			Group: "generic", Since: "1.0.0", Complexity: "O(N)", Summary: "Counts the given keys that exist.", Args: keys, KeyFlags: []string{"RO"},
			Tips: []string{"request_policy:multi_shard", "response_policy:agg_sum"}}, run: runExists},
		{Spec: cmdspec.Spec{Name: "ttl", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "generic", Since: "1.0.0", Complexity: "O(1)", Summary: "Returns a key's time to live in seconds.", Args: key}, run: runTTL},
		{Spec: cmdspec.Spec{Name: "pttl", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "generic", Since: "2.6.0", Complexity: "O(1)", Summary: "Returns a key's time to live in milliseconds.", Args: key}, run: runTTL},
		{Spec: cmdspec.Spec{Name: "type", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "generic", Since: "1.0.0", Complexity: "O(1)", Summary: "Returns the kind of limiter a key holds.", Args: key, KeyFlags: []string{"RO"}}, run: runType},
		{Spec: cmdspec.Spec{Name: "get", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1,
			Group: "string", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Returns a CL.THROTTLE key's theoretical arrival time in Unix nanoseconds, as redis-cell stores it.", Args: key}, run: runGet},
	}
}

// Internal reports the kinds of record that are sluice's own, not users'
// keys: configuration (rules, overrides, scale, the slots a group owns,
// the groups, the log's apply level) and the reservations held on
// counters. No key command lists, counts, reads or deletes them (KEYS,
// SCAN, DBSIZE, EXISTS, TYPE, TTL, DEL, CLUSTER COUNTKEYSINSLOT …): they
// change only through the commands that own them.
func Internal(k keyspace.Kind) bool {
	r := kinds.row(k)
	return r != nil && r.Internal
}

// UserKey reports the kinds of record that are users' keys (limiters'
// counters).
func UserKey(k keyspace.Kind) bool { return !Internal(k) }

// UserKeys is how many of the keys st counts are users' keys.
func UserKeys(st keyspace.Stats) int {
	n := st.Keys
	for k, c := range st.Kinds {
		if Internal(keyspace.Kind(k)) {
			n -= c
		}
	}
	return n
}

// userEntry is key's record when it is a user's key live at now.
func userEntry(s *keyspace.Slot, key []byte, now int64) (keyspace.Entry, bool) {
	e, ok := s.Get(key, now)
	if !ok || Internal(e.Kind()) {
		return keyspace.Entry{}, false
	}
	return e, true
}

func runDel(x *exec, args [][]byte) {
	n := int64(0)
	for _, key := range args[1:] {
		s, now := x.LockKey(key)
		if e, ok := userEntry(s, key, now); ok {
			if Journaled(e.Kind()) {
				x.journaled(x.m.deleted(key))
			}
			s.Delete(e)
			n++
		}
		x.Unlock(s)
	}
	x.w.Int(n)
}

func runExists(x *exec, args [][]byte) {
	n := int64(0)
	for _, key := range args[1:] {
		s, now := x.LockKey(key)
		if _, ok := userEntry(s, key, now); ok {
			n++
		}
		x.Unlock(s)
	}
	x.w.Int(n)
}

// runTTL is TTL and PTTL: -2 for a missing key, -1 for one without expiry.
func runTTL(x *exec, args [][]byte) {
	key := args[1]
	s, now := x.LockKey(key)
	e, ok := userEntry(s, key, now)
	var exp int64
	if ok {
		exp = s.ExpireAt(e)
	}
	x.Unlock(s)
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
	s, now := x.LockKey(key)
	e, ok := userEntry(s, key, now)
	x.Unlock(s)
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
	s, now := x.LockKey(key)
	e, ok, err := s.GetKind(key, keyspace.KindGCRA, now)
	var tat int64
	if ok {
		tat = s.Word(e)
	}
	x.Unlock(s)
	switch {
	case err != nil:
		x.Error(err)
	case !ok:
		x.w.Null()
	default:
		x.w.BulkString(strconv.FormatInt(tat, 10))
	}
}

func serverKeyCommands() []*Command {
	return []*Command{
		{Spec: cmdspec.Spec{Name: "dbsize", Arity: 1, Flags: []string{"readonly", "fast"}, Group: "server", Since: "1.0.0",
			Summary: "Returns the number of keys.", Complexity: "O(N): sluice counts live keys exactly", Tips: []string{"request_policy:all_shards", "response_policy:agg_sum"}, ACLCategories: []string{"@keyspace"}}, slots: room.AllSlots, run: runDBSize},
		{Spec: cmdspec.Spec{Name: "flushall", Arity: -1, Flags: []string{"write"}, Group: "server", Since: "1.0.0",
			Summary: "Removes all keys.", Complexity: "O(N)",
			Tips: []string{"request_policy:all_shards", "response_policy:all_succeeded"}, ACLCategories: []string{"@keyspace", "@dangerous"},
			Args: flushArgs}, slots: room.AllSlots, run: runFlush, check: checkFlush},
		{Spec: cmdspec.Spec{Name: "flushdb", Arity: -1, Flags: []string{"write"}, Group: "server", Since: "1.0.0",
			Summary: "Removes all keys.", Complexity: "O(N)",
			Tips: []string{"request_policy:all_shards", "response_policy:all_succeeded"}, ACLCategories: []string{"@keyspace", "@dangerous"},
			Args: flushArgs}, slots: room.AllSlots, run: runFlush, check: checkFlush},
	}
}

var flushArgs = []Arg{{Name: "flush-type", Type: "oneof", Optional: true, Sub: []Arg{
	{Name: "async", Type: "pure-token", Token: "ASYNC"},
	{Name: "sync", Type: "pure-token", Token: "SYNC"},
}}}

// runDBSize counts the users' keys live at the read instant: exact, so
// replicas answer alike whatever each has swept.
func runDBSize(x *exec, _ [][]byte) {
	if x.group != nil {
		x.w.Int(int64(x.m.keys.LiveLocked(x.m.ReadInstant(x.now), UserKey)))
		return
	}
	x.w.Int(int64(x.m.keys.Live(x.m.ReadInstant(x.now), UserKey)))
}

// checkFlush allows FLUSHALL and FLUSHDB an optional SYNC or ASYNC.
func checkFlush(args [][]byte) string {
	if len(args) > 2 || (len(args) == 2 && !resp.EqualFold(args[1], "sync") && !resp.EqualFold(args[1], "async")) {
		return resp.ErrSyntax
	}
	return ""
}

func runFlush(x *exec, args [][]byte) {
	if bad := checkFlush(args); bad != "" {
		x.Fail(bad)
		return
	}
	x.flushAll()
	x.w.OK()
}

// flushAll drops every key, journaling the flush while every slot is
// locked so it is ordered exactly among the quota changes around it.
// Configuration is not data: the loaded rules, the overrides and scales,
// the slots owned and the groups are put back. The reservations go with
// the counters they hold.
func (x *exec) flushAll() {
	var kept []keptConfig
	defer func() {
		for _, r := range rooms() {
			if r.flushed != nil {
				r.flushed(x)
			}
		}
		for _, k := range kept {
			s, _ := x.LockKey(k.key)
			// The apply level is the log's, never journaled (level.go).
			if _, err := s.Insert(k.key, k.kind, k.expireAt, k.obj); err == nil && Journaled(k.kind) {
				x.journaled(x.m.changed(k.key, k.kind, k.expireAt, k.obj))
			}
			x.Unlock(s)
		}
	}()
	var t Ticket
	before := func(slots func(i int) *keyspace.Slot) {
		for i := range slot.Count {
			x.m.beforeWrite(i, slots(i))
		}
		kept = keepConfig(slots, x.Instant())
		x.Instant()
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

// keptConfig is an override, a scale or the log's apply level, which a
// flush puts back: configuration, not counters. (The level's record went
// with a flush once: a member restored from a snapshot taken after it read
// the log as level 0 while the others applied it at 1.)
type keptConfig struct {
	key      []byte
	kind     keyspace.Kind
	expireAt int64
	obj      any
}

// keepConfig collects the overrides and scales live at now, every slot
// held.
func keepConfig(slots func(i int) *keyspace.Slot, now int64) []keptConfig {
	var kept []keptConfig
	for i := range slot.Count {
		s := slots(i)
		if s.Len() == 0 {
			continue
		}
		s.Keys(now, func(key []byte, e keyspace.Entry) bool {
			if r := kinds.row(e.Kind()); r != nil && r.Kept {
				k := e.Kind()
				kept = append(kept, keptConfig{key: bytes.Clone(key), kind: k, expireAt: s.ExpireAt(e), obj: s.Object(e)})
			}
			return true
		})
	}
	return kept
}
