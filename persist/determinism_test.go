package persist_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/clock"
	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/persist"
	"github.com/sluice-rl/sluice/slot"
)

// replica is one node applying a command log: its own state machine (with
// its own random hash seed) behind a command surface whose clock it is
// told the instants by, and optionally a data directory in memory.
type replica struct {
	m     *machine.Machine
	env   *commands.Env
	ctx   *commands.Ctx
	fs    vfs.FS
	store *persist.Store
	sweep keyspace.SweepCursor
}

func newReplica() *replica {
	r := &replica{}
	r.reset()
	return r
}

// reset gives the replica a fresh, empty machine and surface, as a
// process start does.
func (r *replica) reset() {
	r.m = machine.New(machine.Options{})
	r.env = &commands.Env{Machine: r.m, Clock: clock.New(nil), Table: commands.NewTable(r.m), Stats: &commands.Stats{}}
	r.ctx = &commands.Ctx{Env: r.env, Conn: &commands.Conn{Proto: 2, Authenticated: true}, W: &commands.Writer{Proto: 2}}
}

// open restores the replica from its in-memory data directory, through the
// same path a server start takes.
func (r *replica) open(t *testing.T) {
	t.Helper()
	if r.fs == nil {
		r.fs = vfs.NewMem()
	}
	st, err := persist.Open(persist.Options{Dir: "data", FS: r.fs, QuotaFsync: persist.FsyncNo},
		persist.Deps{Keys: r.m.Store(), Now: r.env.Clock.Now, Applied: r.m.Applied, Restore: r.m.Restore, Changes: r.m.Changes})
	if err != nil {
		t.Fatal(err)
	}
	r.store = st
	r.m.SetDurability(st.Journal())
	r.env.Durable = st
}

// restart closes the data directory (a graceful shutdown: final snapshot)
// and opens it again into a fresh machine.
func (r *replica) restart(t *testing.T) {
	t.Helper()
	if err := r.store.Close(); err != nil {
		t.Fatal(err)
	}
	r.reset()
	r.open(t)
}

// apply runs one logged command at its instant and returns the reply bytes.
func (r *replica) apply(at int64, args [][]byte) []byte {
	if at > r.env.Clock.Now() {
		r.env.Clock.Freeze(at)
	}
	r.ctx.Reset()
	r.ctx.W.Buf = r.ctx.W.Buf[:0]
	r.env.Table.Dispatch(r.ctx, args)
	if err := r.ctx.Conn.AwaitDurable(); err != nil {
		panic(err)
	}
	return r.ctx.W.Buf
}

func (r *replica) snapshot(t *testing.T) []byte {
	var buf bytes.Buffer
	if _, err := persist.WriteSnapshot(&buf, r.m.Store(), persist.Header{Seq: 1, Created: 1, Applied: r.m.Applied()}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func (r *replica) digest(t *testing.T) string {
	d, err := r.m.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// restoreFrom replaces the replica's state with a snapshot streamed to it,
// as a follower catching up does.
func (r *replica) restoreFrom(t *testing.T, snap []byte) {
	t.Helper()
	r.reset()
	h, err := persist.LoadSnapshot(bytes.NewReader(snap), r.m.Store())
	if err != nil {
		t.Fatal(err)
	}
	r.m.Restore(h.Applied)
}

func words(s ...string) [][]byte {
	args := make([][]byte, len(s))
	for i, a := range s {
		args[i] = []byte(a)
	}
	return args
}

// randomCommand draws a command of any limiter kind, or a read, on a small
// key set, so kinds collide (WRONGTYPE), keys expire and come back, and
// leases churn.
func randomCommand(rng *rand.Rand) [][]byte {
	key := fmt.Sprintf("{t%d}k%d", rng.IntN(4), rng.IntN(40))
	id := fmt.Sprintf("req%d", rng.IntN(30))
	n := func(lo, k int) string { return fmt.Sprint(lo + rng.IntN(k)) }
	switch rng.IntN(30) {
	case 0, 1:
		return words("CL.THROTTLE", key, n(0, 10), n(1, 20), n(1, 30), n(0, 3))
	case 2:
		return words("SW.CHECK", key, n(1, 20), n(1, 30))
	case 3:
		return words("SW.CHECK", key, n(1, 20), n(1, 30), "EXACT", "COST", n(0, 4))
	case 4:
		return words("FW.CHECK", key, n(1, 20), n(1, 30))
	case 5, 6:
		return words("CONC.ACQUIRE", key, n(1, 5), n(1, 20), id)
	case 7:
		return words("CONC.RELEASE", key, id)
	case 8:
		return words("CONC.RENEW", key, id, n(1, 20))
	case 9:
		return words("QUOTA.CHECK", key, n(1, 50), []string{"HOUR", "DAY", "MONTH"}[rng.IntN(3)], "TZ", "Europe/Berlin")
	case 10:
		return words("QUOTA.REFUND", key, n(0, 3))
	case 11:
		return words("QUOTA.RESET", key)
	case 12:
		return words("DEL", key)
	case 13:
		return words("TTL", key)
	case 14:
		return words("PTTL", key)
	case 15:
		return words("EXISTS", key, fmt.Sprintf("{t%d}k%d", rng.IntN(4), rng.IntN(40)))
	case 16:
		return words("TYPE", key)
	case 17:
		return words("GET", key)
	case 18:
		return words("CONC.GET", key)
	case 19:
		return words("QUOTA.GET", key)
	case 20:
		return words("DBSIZE")
	case 21:
		return words("SCAN", "0", "COUNT", "100000")
	case 22:
		if rng.IntN(200) == 0 {
			return words("FLUSHALL")
		}
		return words("KEYS", "{t1}*")
	case 24:
		if rng.IntN(20) == 0 {
			return words("RL.RULES", "LOAD", "d.yaml", traceRules[rng.IntN(len(traceRules))])
		}
		return words("RL.RULES", "LIST")
	case 25, 26:
		return words("RL.CHECK", "d", "COST", n(0, 3), "DESCRIPTOR", "user", "u"+n(0, 6),
			"DESCRIPTOR", "endpoint", "e"+n(0, 3), "DESCRIPTOR", "plan", []string{"free", "pro"}[rng.IntN(2)],
			"DESCRIPTOR", "month", "m"+n(0, 3))
	case 27:
		if rng.IntN(3) == 0 {
			return words("RL.OVERRIDE", "DEL", "d", "DESCRIPTOR", "user", "u"+n(0, 6))
		}
		return words("RL.OVERRIDE", "SET", "d", n(1, 20), []string{"second", "minute", "7"}[rng.IntN(3)],
			"UNTIL", "4102444900", "DESCRIPTOR", "user", "u"+n(0, 6))
	case 28:
		return words("RL.SCALE", "SET", "d", []string{"0.25", "0.5", "1", "0.999999"}[rng.IntN(4)], "RECOVER", n(0, 60))
	case 29:
		return words("RL.CHECKALL", "COST", n(0, 2), "LIMIT", key, "FIXED", n(1, 9), n(1, 30),
			"LIMIT", fmt.Sprintf("{t%d}g", rng.IntN(4)), "GCRA", n(0, 3), n(1, 5), n(1, 9))
	default:
		return words("CL.THROTTLE", key, n(0, 10), n(1, 20), n(1, 30), "0")
	}
}

// traceRules are the rule files the random trace loads in turn.
var traceRules = []string{`domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: endpoint
    rate_limit:
      requests_per_unit: 3
      sluice: {algorithm: sliding-exact, period: 30s}
  - key: plan
    value: free
    rate_limit:
      requests_per_unit: 2
      sluice: {algorithm: gcra, burst: 1, period: 10s}
  - key: month
    rate_limit:
      unit: month
      requests_per_unit: 20
      sluice: {algorithm: quota, zone: America/New_York}
`, `domain: d
descriptors:
  - key: user
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: endpoint
    rate_limit:
      requests_per_unit: 4
      sluice: {algorithm: sliding, period: 20s}
`}

// TestReplicasConverge is the rule everything rests on: state changes only
// through apply(command, now), so two nodes given the same commands at the
// same instants answer alike and hold identical state, whatever their hash
// seeds or memory layout, and whatever each does on its own besides: sweeps
// at different moments, CONFIG RESETSTAT, a snapshot restored midway, a
// graceful restart through its data directory.
func TestReplicasConverge(t *testing.T) {
	const steps = 12_000
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		policyRefusals := 0
		a, b := newReplica(), newReplica()
		b.open(t)
		now := int64(4102444800) * 1e9
		for step := range steps {
			now += rng.Int64N(int64(3e9))
			args := randomCommand(rng)
			ra := bytes.Clone(a.apply(now, args))
			rb := b.apply(now, args)
			if string(args[0]) == "RL.CHECK" && bytes.HasPrefix(ra, []byte("*7\r\n:1\r\n")) {
				policyRefusals++
			}
			if !bytes.Equal(ra, rb) {
				t.Fatalf("seed %d step %d: %q answered %q and %q", seed, step, args, ra, rb)
			}
			// Each replica sweeps on its own schedule.
			if rng.IntN(7) == 0 {
				a.m.Sweep(&a.sweep, 1+rng.IntN(50), 0)
			}
			if rng.IntN(11) == 0 {
				b.m.Sweep(&b.sweep, 1+rng.IntN(500), 0)
			}
			switch step {
			case steps / 4:
				a.apply(now, words("CONFIG", "RESETSTAT"))
			case steps / 3:
				a.restoreFrom(t, a.snapshot(t))
			case 2 * steps / 3:
				b.restart(t)
			}
			if step%1000 == 999 {
				if da, db := a.digest(t), b.digest(t); da != db {
					t.Fatalf("seed %d step %d: digests differ: %s and %s", seed, step, da, db)
				}
				if sa, sb := a.snapshot(t), b.snapshot(t); !bytes.Equal(sa, sb) {
					t.Fatalf("seed %d step %d: snapshots differ (%d and %d bytes)", seed, step, len(sa), len(sb))
				}
			}
		}
		if n := a.m.Keys().Live(a.m.Applied()); n == 0 {
			t.Fatalf("seed %d: the trace left no keys; it tests nothing", seed)
		}
		if policyRefusals == 0 {
			t.Fatalf("seed %d: RL.CHECK never refused; the trace does not reach the rules", seed)
		}
		if err := b.store.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSweepDoesNotMoveTime is the probe that found background work moving
// a slot's time: a sweep on one replica only must not change what the
// next command answers there.
func TestSweepDoesNotMoveTime(t *testing.T) {
	t0 := int64(4102444800) * 1e9
	a, b := newReplica(), newReplica()
	for _, r := range []*replica{a, b} {
		if got := string(r.apply(t0, words("CL.THROTTLE", "k", "0", "1", "10"))); got != "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:10\r\n" {
			t.Fatalf("first call answered %q", got)
		}
	}
	// a sweeps long after t0 by the wall clock; it may only sweep at its
	// applied instant.
	var cur keyspace.SweepCursor
	for range 20 {
		a.m.Sweep(&cur, 1<<20, 0)
	}
	ra := string(a.apply(t0+1e9, words("CL.THROTTLE", "k", "0", "1", "10")))
	rb := string(b.apply(t0+1e9, words("CL.THROTTLE", "k", "0", "1", "10")))
	if ra != rb || ra != "*5\r\n:1\r\n:1\r\n:0\r\n:9\r\n:9\r\n" {
		t.Fatalf("after a sweep on one replica: %q and %q, want both refused with retry 9", ra, rb)
	}
}

// TestReadsOfExpiredKeysChangeNothing: every read of an expired key
// answers "absent" and leaves the digest as it was.
func TestReadsOfExpiredKeysChangeNothing(t *testing.T) {
	t0 := int64(4102444800) * 1e9
	r := newReplica()
	r.apply(t0, words("CL.THROTTLE", "{x}g", "0", "1", "10"))
	r.apply(t0, words("CONC.ACQUIRE", "{x}c", "2", "5", "id"))
	r.apply(t0, words("SW.CHECK", "{x}s", "2", "5", "EXACT"))
	r.apply(t0, words("FW.CHECK", "{x}f", "2", "5"))
	r.apply(t0, words("QUOTA.CHECK", "{x}q", "2", "HOUR"))
	// A write to another slot moves the applied instant well past every
	// expiry above.
	late := t0 + 3*3600e9
	r.apply(late, words("CL.THROTTLE", "{y}other", "0", "1", "10"))
	before := r.digest(t)
	records := r.m.Keys().Stats().Keys
	for _, args := range [][]string{
		{"TTL", "{x}g"}, {"PTTL", "{x}c"}, {"EXISTS", "{x}g", "{x}c", "{x}s", "{x}f", "{x}q"}, {"TYPE", "{x}s"},
		{"GET", "{x}g"}, {"CONC.GET", "{x}c"}, {"QUOTA.GET", "{x}q"}, {"DBSIZE"}, {"SCAN", "0"}, {"KEYS", "*"},
		{"CL.THROTTLE", "{x}g", "0", "1", "10", "0"}, {"SW.CHECK", "{x}s", "2", "5", "COST", "0", "EXACT"},
		{"CLUSTER", "COUNTKEYSINSLOT", "16287"}, {"CLUSTER", "GETKEYSINSLOT", "16287", "10"},
	} {
		r.apply(t0+3600e9, words(args...))
	}
	if got := string(r.apply(late, words("EXISTS", "{x}g", "{x}c", "{x}s", "{x}f", "{x}q"))); got != ":0\r\n" {
		t.Fatalf("expired keys read as present: %q", got)
	}
	if after := r.digest(t); after != before {
		t.Fatalf("reads changed the digest: %s → %s", before, after)
	}
	if n := r.m.Keys().Stats().Keys; n != records {
		t.Fatalf("reads removed records: %d → %d", records, n)
	}
}

// A frozen view holds the state exactly as it was at the freeze, however
// the machine changes while it is read: copy-on-write per slot.
func TestFrozenViewIsPointInTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	r := newReplica()
	now := int64(4102444800) * 1e9
	for range 3000 {
		now += rng.Int64N(int64(1e8))
		r.apply(now, randomCommand(rng))
	}
	slotsNow := func() [][]byte {
		var out [][]byte
		for i := range slot.Count {
			s := r.m.Store().Lock(i)
			b, _, err := persist.EncodeSlot(nil, s, r.m.Applied())
			s.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
	want := slotsNow()
	wantSnap, wantDigest := r.snapshot(t), r.digest(t)
	f, err := r.m.Freeze(persist.EncodeSlot, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.Freeze(persist.EncodeSlot, nil); err == nil {
		t.Fatal("a second view opened while one is open")
	}
	got := make([][]byte, slot.Count)
	read := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			b, _, err := f.Slot(i)
			if err != nil {
				t.Fatal(err)
			}
			got[i] = b
		}
	}
	// Half the slots are read, then the machine changes everywhere (FLUSHALL
	// included), then the rest are read.
	read(0, slot.Count/2)
	for range 2000 {
		now += rng.Int64N(int64(1e8))
		r.apply(now, randomCommand(rng))
	}
	r.apply(now, words("FLUSHALL"))
	r.apply(now, words("CL.THROTTLE", "{t1}new", "1", "1", "1"))
	read(slot.Count/2, slot.Count)
	f.Release()
	for i := range slot.Count {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("slot %d: the view holds %d bytes, the state at the freeze %d", i, len(got[i]), len(want[i]))
		}
	}
	if bytes.Equal(want[slot.Count-1], slotsNow()[slot.Count-1]) && len(want[slot.Count-1]) == 0 {
		t.Log("the last slot was empty throughout")
	}
	// Written whole, a view is the snapshot of its instant, and restores
	// to that instant's digest.
	q := newReplica()
	q.restoreFrom(t, wantSnap)
	f2, err := q.m.Freeze(persist.EncodeSlot, nil)
	if err != nil {
		t.Fatalf("no view after Release: %v", err)
	}
	var buf bytes.Buffer
	if _, err := persist.WriteFrozen(&buf, f2, persist.Header{Seq: 1, Created: 1}); err != nil {
		t.Fatal(err)
	}
	f2.Release()
	if !bytes.Equal(buf.Bytes(), wantSnap) {
		t.Fatal("WriteFrozen differs from WriteSnapshot of the same state")
	}
	// Copied unordered under the lock and ordered after it (as a replica
	// snapshots), the bytes are the same.
	f3, err := q.m.Freeze(persist.EncodeSlotUnordered, persist.OrderRecords)
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if _, err := persist.WriteFrozen(&buf, f3, persist.Header{Seq: 1, Created: 1}); err != nil {
		t.Fatal(err)
	}
	f3.Release()
	if !bytes.Equal(buf.Bytes(), wantSnap) {
		t.Fatal("an unordered view, ordered after its lock, differs from WriteSnapshot")
	}
	if d := q.digest(t); d != wantDigest {
		t.Fatalf("restored digest %s, want %s", d, wantDigest)
	}
}
