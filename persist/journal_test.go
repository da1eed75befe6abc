package persist

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/quota"
)

// With FsyncAlways, changes that queue while a sync runs share the next
// one: 64 concurrent writers need 2 syncs, not 64.
func TestJournalGroupCommit(t *testing.T) {
	gate := newGateFS(vfs.NewMem())
	clk := newClock(t0)
	st := openStore(t, gate, FsyncAlways, keyspace.New(), clk)
	defer st.Close()
	q := quotaState(t, t0, 100, 1, "UTC")
	before := st.j.syncs.Load()

	gate.close()
	var wg sync.WaitGroup
	errs := make(chan error, 65)
	change := func(i int) {
		defer wg.Done()
		errs <- st.Wait(st.QuotaChanged([]byte(fmt.Sprintf("k%d", i)), q))
	}
	// The first change's commit holds the writer inside a sync …
	wg.Add(1)
	go change(0)
	gate.waitBlocked(t)
	// … while 64 more queue behind it.
	for i := 1; i <= 64; i++ {
		wg.Add(1)
		go change(i)
	}
	waitFor(t, func() bool { return st.j.lastSeq() == 65 })
	gate.open()
	wg.Wait()
	close(errs)
	for err := range errs {
		mustOK(t, err)
	}
	if syncs := st.j.syncs.Load() - before; syncs != 2 {
		t.Fatalf("%d syncs for 65 changes, want 2", syncs)
	}
	if commits := st.j.commits.Load(); commits > 3 {
		t.Fatalf("%d commits", commits)
	}
}

// Under everysec the writer lingers after a change for more to share its
// commit; a queue past lingerBytes, a snapshot's sync or closing ends the
// linger at once (a linger of an hour here, so only those can end it).
func TestJournalLingerEndsAtBytesAndClose(t *testing.T) {
	st := openStore(t, vfs.NewMem(), FsyncEverySec, keyspace.New(), newClock(t0))
	defer st.Close()
	st.j.delay = time.Hour
	q := quotaState(t, t0, 100, 1, "UTC")
	// Exactly enough changes to pass lingerBytes: a queue's bytes are each
	// change's key, expiry and state.
	key := make([]byte, 1024)
	per := len(key) + 8 + len(q.AppendBinary(nil))
	for i := range (lingerBytes + per - 1) / per {
		binary.BigEndian.PutUint64(key, uint64(i))
		st.QuotaChanged(key, q)
	}
	last := st.j.lastSeq()
	committed := func() uint64 {
		st.j.mu.Lock()
		defer st.j.mu.Unlock()
		return st.j.committed
	}
	waitFor(t, func() bool { return committed() == last })
	// A snapshot needs every change so far on disk: it hurries the writer.
	st.QuotaChanged([]byte("before a snapshot"), q)
	synced := make(chan error, 1)
	go func() { synced <- st.j.syncThrough(st.j.lastSeq()) }()
	select {
	case err := <-synced:
		mustOK(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("a snapshot's sync waited out the linger")
	}
	st.QuotaChanged([]byte("one more"), q)
	closed := make(chan error, 1)
	go func() { closed <- st.j.close() }()
	select {
	case err := <-closed:
		mustOK(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("closing waited out the linger")
	}
	if got, want := committed(), st.j.lastSeq(); got != want {
		t.Fatalf("closed with change %d committed, want %d", got, want)
	}
}

// A reply waits for its own change only: Wait returns for a change already
// synced even while a later one is held in a sync.
func TestJournalWaitIsPerChange(t *testing.T) {
	gate := newGateFS(vfs.NewMem())
	st := openStore(t, gate, FsyncAlways, keyspace.New(), newClock(t0))
	defer st.Close()
	q := quotaState(t, t0, 100, 1, "UTC")
	first := st.QuotaChanged([]byte("a"), q)
	mustOK(t, st.Wait(first))
	gate.close()
	second := st.QuotaChanged([]byte("b"), q)
	gate.waitBlocked(t)
	mustOK(t, st.Wait(first))
	done := make(chan error)
	go func() { done <- st.Wait(second) }()
	select {
	case err := <-done:
		t.Fatalf("Wait returned (%v) while its sync is held", err)
	default:
	}
	gate.open()
	mustOK(t, <-done)
}

// Random sequences of quota changes, deletions, flushes and snapshots,
// applied to a keyspace as the commands do, reopen (gracefully or after a
// crash under FsyncAlways) to exactly the keyspace's quotas.
func TestJournalMatchesModel(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		for _, crash := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed%d/crash=%v", seed, crash), func(t *testing.T) {
				runModel(t, seed, crash)
			})
		}
	}
}

func runModel(t *testing.T, seed uint64, crash bool) {
	rng := rand.New(rand.NewPCG(seed, 7))
	fs := vfs.NewCrashableMem()
	clk := newClock(t0)
	ks := keyspace.New()
	policy := FsyncEverySec
	if crash {
		policy = FsyncAlways
	}
	st := openStore(t, fs, policy, ks, clk)
	sch, err := quota.NewSchedule(quota.Day, 0, false, "UTC")
	mustOK(t, err)
	for step := range 300 {
		now := t0 + int64(step)*1e9
		clk.ns.Store(now)
		key := []byte(fmt.Sprintf("{%d}q%d", rng.IntN(3), rng.IntN(30)))
		var seq uint64
		switch r := rng.IntN(100); {
		case r < 70: // QUOTA.CHECK
			s, at := ks.LockKey(key), int64(now)
			e, found, err := s.GetKind(key, keyspace.KindQuota, at)
			if err != nil {
				// A GCRA key from an earlier step: delete it first.
				e, _ = s.Get(key, at)
				s.Delete(e)
				found = false
			}
			var old quota.State
			if found {
				old, err = quota.DecodeRecord(s.State(e), quota.LoadZone)
				mustOK(t, err)
			}
			next, store, _, err := quota.Check(old, found, at, 50, sch, int64(1+rng.IntN(5)))
			mustOK(t, err)
			if store {
				mustOK(t, machine.StoreState(s, key, keyspace.KindQuota, next.ExpireAt(), &next))
				seq = st.QuotaChanged(key, &next)
			}
			s.Unlock()
		case r < 85: // DEL

			s, at := ks.LockKey(key), int64(now)
			if e, ok := s.Get(key, at); ok {
				if e.Kind() == keyspace.KindQuota {
					seq = st.QuotaDeleted(key)
				}
				s.Delete(e)
			}
			s.Unlock()
		case r < 90: // a CL.THROTTLE key (not journaled)
			s, at := ks.LockKey(key), int64(now)
			if _, ok := s.Get(key, at); !ok {
				s.Insert(key, keyspace.KindGCRA, now+1e12, nil)
			}
			s.Unlock()
		case r < 91: // FLUSHALL
			ks.FlushAll(func(func(int) *keyspace.Slot) { seq = st.Flushed() })
		default: // a snapshot
			mustOK(t, st.Save())
		}
		mustOK(t, st.Wait(seq))
	}
	quotas := func(m map[string]keyDump) map[string]keyDump {
		out := map[string]keyDump{}
		for k, d := range m {
			if d.Kind == keyspace.KindQuota {
				out[k] = d
			}
		}
		return out
	}
	want := dump(t, ks, clk.Now())
	reopenFS := vfs.FS(fs)
	if crash {
		reopenFS = fs.CrashClone(vfs.CrashCloneCfg{})
		defer st.Close()
	} else {
		mustOK(t, st.Close())
	}
	ks2 := keyspace.New()
	st2 := openStore(t, reopenFS, policy, ks2, clk)
	defer st2.Close()
	got := dump(t, ks2, clk.Now())
	if crash {
		// Only quotas are durable between snapshots.
		sameKeys(t, quotas(got), quotas(want))
	} else {
		sameKeys(t, got, want)
	}
}
