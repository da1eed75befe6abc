package decide

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/machine/placement"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/machine/room/roomtest"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// fakeExec is an apply as the room sees it, over a keyspace of its own: it
// checks the contract the core relies on — every slot locked (alone or in
// a decision's group) is released before the command returns, a change is
// journaled holding its key's slot, and a command answers exactly once.
type fakeExec struct {
	*roomtest.Locks
	t     *testing.T
	keys  *keyspace.Keyspace
	now   int64
	w     resp.Writer
	out   room.Outcome
	group *room.SlotLocks
	// groups counts the groups held and not released.
	groups  int
	journal []string
	lim     limiters.Scratch
	dec     Scratch
	table   map[string]room.Command[Exec]
}

func (f *fakeExec) LockKey(key []byte) (*keyspace.Slot, int64) { return f.LockSlot(slot.Of(key)) }

func (f *fakeExec) LockSlot(i int) (*keyspace.Slot, int64) {
	if f.group != nil {
		return f.group.Slot(i), f.now
	}
	return f.Locks.LockSlot(i), f.now
}

func (f *fakeExec) Unlock(s *keyspace.Slot) {
	if f.group == nil {
		f.Locks.Unlock(s)
	}
}

func (f *fakeExec) HoldGroup(l *room.SlotLocks) bool {
	if f.group != nil {
		return false
	}
	if f.Held() != 0 {
		f.t.Fatal("a group locked while a slot is held alone")
	}
	l.Lock()
	f.group = l
	f.groups++
	return true
}

func (f *fakeExec) ReleaseGroup(l *room.SlotLocks, took bool) {
	if took {
		if f.group != l {
			f.t.Fatal("a group released that is not the one held")
		}
		f.group = nil
		f.groups--
		l.Unlock()
	}
}

func (f *fakeExec) Instant() int64          { return f.now }
func (f *fakeExec) Reply() *resp.Writer     { return &f.w }
func (f *fakeExec) Outcome() *room.Outcome  { return &f.out }
func (f *fakeExec) At(uint32) bool          { return true }
func (f *fakeExec) DecideScratch() *Scratch { return &f.dec }

func (f *fakeExec) Scratch() *limiters.Scratch { return &f.lim }

func (f *fakeExec) Limiter(res limiter.Result) { f.w.Limiter(res.Reply()) }

func (f *fakeExec) LimiterReply(_ bool, reply [5]int64) { f.w.Limiter(reply) }

// Error types an error as the core's apply does.
func (f *fakeExec) Error(err error) {
	var fe room.FenceError
	switch {
	case errors.As(err, &fe):
		f.FailFor(room.ReasonNotNow, room.ErrorReply(err))
	case errors.Is(err, keyspace.ErrWrongType):
		f.FailFor(room.ReasonWrongType, room.ErrorReply(err))
	default:
		f.Fail(room.ErrorReply(err))
	}
}

func (f *fakeExec) Fail(msg string) { f.FailFor(room.ReasonInvalid, msg) }

func (f *fakeExec) FailFor(r room.Reason, msg string) {
	f.out.Err, f.out.Reason = msg, r
	f.w.Error(msg)
}

// holds reports whether key's slot is locked by this apply, alone or in
// its group.
func (f *fakeExec) holds(key []byte) bool {
	if f.group != nil {
		return f.group.All || containsSlot(f.group.Slots, slot.Of(key))
	}
	return f.Holds(key)
}

func containsSlot(slots []int, s int) bool {
	for _, x := range slots {
		if x == s {
			return true
		}
	}
	return false
}

func (f *fakeExec) journaled(what string, key []byte) {
	if !f.holds(key) {
		f.t.Errorf("%s of %q journaled without its slot's lock", what, key)
	}
	f.journal = append(f.journal, what+" "+string(key))
}

func (f *fakeExec) Changed(key []byte, _ keyspace.Kind, _ int64, _ any) { f.journaled("changed", key) }
func (f *fakeExec) Deleted(key []byte)                                  { f.journaled("deleted", key) }
func (f *fakeExec) QuotaChanged(key []byte, _ *quota.State)             { f.journaled("quota", key) }

// Run applies a command of the fake table (RL.PART's nested commands).
func (f *fakeExec) Run(cmd TableCommand, args [][]byte) { cmd.(fakeCommand).c.Run(f, args) }

// fakeCommand is a room command as the fake core's table holds it.
type fakeCommand struct{ c room.Command[Exec] }

func (c fakeCommand) ArityOK(n int) bool {
	if c.c.Arity >= 0 {
		return n == c.c.Arity
	}
	return n >= -c.c.Arity
}

func (c fakeCommand) Check(args [][]byte) string {
	if c.c.Check == nil {
		return ""
	}
	return c.c.Check(args)
}

func (c fakeCommand) EveryGroup() bool { return c.c.EveryGroup }

// fakeCore is the machine outside an apply: the room's own commands and
// kinds, at the exec's instant.
type fakeCore struct {
	f     *fakeExec
	kinds map[keyspace.Kind]room.Kind
}

func (c fakeCore) Applied() int64              { return c.f.now }
func (c fakeCore) ReadInstant(now int64) int64 { return max(now, c.f.now) }
func (c fakeCore) Level() uint32               { return 1 }

func (c fakeCore) Lookup(name []byte) TableCommand {
	if cmd, ok := c.f.table[strings.ToLower(string(name))]; ok {
		return fakeCommand{cmd}
	}
	return nil
}

func (c fakeCore) EncodeState(dst []byte, kind keyspace.Kind, obj any) ([]byte, error) {
	if out, ok := c.kinds[kind].Encode(dst, obj); ok {
		return out, nil
	}
	return dst, fmt.Errorf("not a %v", kind)
}

func (c fakeCore) DecodeState(kind keyspace.Kind, b []byte) (any, error) {
	return c.kinds[kind].Decode(b, nil)
}

func (c fakeCore) KindName(kind keyspace.Kind) string { return c.kinds[kind].Name }

const contractRules = `domain: edge
descriptors:
  - key: gcra
    rate_limit: {name: gcra, unit: second, requests_per_unit: 10, sluice: {algorithm: gcra, burst: 9}}
  - key: fixed
    rate_limit: {name: fixed, unit: minute, requests_per_unit: 100}
  - key: sliding
    rate_limit: {name: sliding, unit: minute, requests_per_unit: 100, sluice: {algorithm: sliding}}
  - key: quota
    rate_limit: {name: quota, unit: day, requests_per_unit: 100, sluice: {algorithm: quota}}
`

// The room's commands, run with arguments good and bad in any order, keep
// the lock discipline (no slot or group held after a command), journal
// only under the key's lock, answer exactly one reply, and refuse in Run
// what Check refuses, with the same text.
func TestCommandsKeepTheContract(t *testing.T) {
	keys := keyspace.New()
	f := &fakeExec{Locks: roomtest.NewLocks(t, keys), t: t, keys: keys, now: 1_767_225_600_000_000_000,
		table: map[string]room.Command[Exec]{}}
	core := fakeCore{f: f, kinds: map[keyspace.Kind]room.Kind{}}
	for _, k := range Kinds() {
		core.kinds[k.Kind] = k
	}
	r := New(Options{Core: core, Keys: keys, Limiters: limiters.New(), Placement: placement.New(nil)})
	for _, c := range r.Commands() {
		if _, dup := f.table[c.Name]; dup || c.Run == nil {
			t.Fatalf("%s: declared twice or without Run", c.Name)
		}
		f.table[c.Name] = c
	}
	digest := func() string { return r.RulesDigest("edge") }
	calls := [][]string{
		{"rl.check", "edge", "DESCRIPTOR", "gcra", "a"}, {"rl.check", "edge", "COST", "3", "DESCRIPTOR", "fixed", "a", "DESCRIPTOR", "sliding", "b"},
		{"rl.check", "edge", "DESCRIPTOR", "quota", "q"}, {"rl.check", "nowhere", "DESCRIPTOR", "gcra", "a"}, {"rl.check", "edge", "DESCRIPTOR", "gcra", "a", "DESCRIPTOR"},
		{"rl.checkall", "LIMIT", "k1", "10", "60", "LIMIT", "k2", "5", "60"}, {"rl.checkall", "LIMIT", "k1", "x", "60"},
		{"rl.shouldratelimit", "edge", "1", "1", "-", "-", "-", "gcra", "a"},
		{"rl.shouldratelimit", "edge", "2", "1", "-", "-", "-", "fixed", "a", "1", "3", "-", "-", "sliding", "b"},
		{"rl.shouldratelimit", "edge", "x", "1", "-", "-", "-", "gcra", "a"}, {"rl.shouldratelimit", "edge", "1", "1", "-", "10", "-", "gcra", "a"},
		{"rl.part", "DECIDE", "<digest>", "RL.SHOULDRATELIMIT", "edge", "1", "1", "-", "-", "-", "gcra", "c"},
		{"rl.reserve", "edge", "r1", "60", "DESCRIPTOR", "fixed", "a"}, {"rl.reserve", "edge", "r2", "60", "COST", "2", "DESCRIPTOR", "gcra", "a", "DESCRIPTOR", "quota", "q"},
		{"rl.reserve", "edge", "r3", "0", "DESCRIPTOR", "fixed", "a"},
		{"rl.settle", "edge", "r1", "0"}, {"rl.settle", "edge", "r2", "5"}, {"rl.settle", "edge", "r9", "1"}, {"rl.settle", "edge", "r1", "-1"},
		{"rl.cancel", "edge", "r2"}, {"rl.cancel", "edge", "r3"},
		{"rl.lease", "edge", "gw-1", "10", "WANT", "40", "DESCRIPTOR", "fixed", "a"}, {"rl.lease", "edge", "gw-2", "10", "WANT", "90", "DESCRIPTOR", "fixed", "a"},
		{"rl.lease", "RETURN", "edge", "gw-1", "UNUSED", "3", "DESCRIPTOR", "fixed", "a"}, {"rl.lease", "edge", "gw-1", "10", "WANT", "-4", "DESCRIPTOR", "fixed", "a"},
		{"rl.override", "SET", "edge", "5", "minute", "DESCRIPTOR", "fixed", "a"}, {"rl.override", "LIST", "edge"},
		{"rl.override", "DEL", "edge", "DESCRIPTOR", "fixed", "a"}, {"rl.override", "SET", "edge", "x", "minute", "DESCRIPTOR", "fixed", "a"},
		{"rl.scale", "SET", "edge", "0.5"}, {"rl.scale", "GET", "edge"}, {"rl.scale", "SET", "edge", "2"},
		{"rl.rules", "LIST"}, {"rl.rules", "LOAD", "edge.yaml", "domain: [broken"}, {"rl.rules", "FROB"},
		{"rl.part", "DECIDE", "<digest>", "RL.CHECK", "edge", "DESCRIPTOR", "gcra", "b"},
		{"rl.part", "RESERVE", "<digest>", "p1", "60", "RL.CHECK", "edge", "DESCRIPTOR", "fixed", "c"},
		{"rl.part", "DECIDE", "stale", "RL.CHECK", "edge", "DESCRIPTOR", "gcra", "b"},
		{"rl.part", "APPLY", "RL.SCALE", "SET", "edge", "1"}, {"rl.part", "DIGEST", "edge"}, {"rl.part", "FROB"},
	}
	load := []string{"rl.rules", "LOAD", "edge.yaml", contractRules}
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 400 {
		call := calls[rng.IntN(len(calls))]
		if round == 0 || rng.IntN(40) == 0 {
			call = load
		}
		args := make([][]byte, len(call))
		for i, a := range call {
			if a == "<digest>" {
				a = digest()
			}
			args[i] = []byte(a)
		}
		c, ok := f.table[call[0]]
		if !ok {
			t.Fatalf("no command %s", call[0])
		}
		what := fmt.Sprintf("round %d %q", round, call)
		if !(fakeCommand{c}).ArityOK(len(args)) {
			t.Fatalf("%s: the call's arity is wrong", what)
		}
		f.now += int64(rng.IntN(3)) * 1e9
		f.w.Buf, f.out, f.journal = f.w.Buf[:0], room.Outcome{}, f.journal[:0]
		bad := ""
		if c.Check != nil {
			bad = c.Check(args)
		}
		c.Run(f, args)
		if f.Held() != 0 || f.groups != 0 || f.group != nil {
			t.Fatalf("%s: %d slots and %d groups still locked after the command", what, f.Held(), f.groups)
		}
		var replyErr resp.ReplyError
		if _, err := resp.DecodeReply(f.w.Buf); err != nil && !errors.Is(err, resp.ErrNull) && !errors.As(err, &replyErr) {
			t.Fatalf("%s: not exactly one reply (%v): %q", what, err, f.w.Buf)
		}
		if bad != "" && (f.out.Err != bad || f.out.Reason != room.ReasonInvalid) {
			t.Errorf("%s: Check refuses %q, Run answered %q (%v)", what, bad, f.out.Err, f.out.Reason)
		}
		if len(f.journal) > 0 && f.out.Reason == room.ReasonInvalid {
			t.Errorf("%s: journaled %v, and answered that the call was wrong: %q", what, f.journal, f.out.Err)
		}
	}
}

// A room's options name what is missing; only the log may be.
func TestOptionsValidate(t *testing.T) {
	keys := keyspace.New()
	full := Options{Core: fakeCore{}, Keys: keys, Limiters: limiters.New(), Placement: placement.New(nil)}
	if err := full.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]Options{
		"Core":      {Keys: keys, Limiters: full.Limiters, Placement: full.Placement},
		"Keys":      {Core: full.Core, Limiters: full.Limiters, Placement: full.Placement},
		"Limiters":  {Core: full.Core, Keys: keys, Placement: full.Placement},
		"Placement": {Core: full.Core, Keys: keys, Limiters: full.Limiters},
	} {
		if err := o.Validate(); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: %v", name, err)
		}
	}
}
