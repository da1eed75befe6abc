package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/quota"
)

// journalQuotas journals every quota key of ks, as QUOTA.CHECK would have.
func journalQuotas(t testing.TB, st *Store, ks *keyspace.Keyspace, now int64) uint64 {
	t.Helper()
	var last uint64
	for k, d := range dump(t, ks, now) {
		if d.Kind != keyspace.KindQuota {
			continue
		}
		s, at := ks.LockKey([]byte(k)), int64(now)
		e, ok := s.Get([]byte(k), at)
		if !ok {
			t.Fatalf("quota %q vanished", k)
		}
		q, err := quota.DecodeRecord(s.State(e), quota.LoadZone)
		if err != nil {
			t.Fatal(err)
		}
		if seq := st.QuotaChanged([]byte(k), &q); seq > last {
			last = seq
		}
		s.Unlock()
	}
	return last
}

// A graceful close and reopen restores every kind exactly.
func TestStoreRestoresEveryKind(t *testing.T) {
	fs := vfs.NewMem()
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, fs, FsyncEverySec, ks, clk)
	fillEveryKind(t, ks, 40, t0)
	journalQuotas(t, st, ks, t0)
	mustOK(t, st.Close())
	want := dump(t, ks, t0)

	ks2 := keyspace.New()
	st2 := openStore(t, fs, FsyncEverySec, ks2, clk)
	defer st2.Close()
	sameKeys(t, dump(t, ks2, t0), want)
	info := st2.Loaded()
	if !info.SnapshotFound || info.SnapshotKeys != 200 || info.QuotaKeys != 40 || info.Superseded != 40 || info.Expired != 0 {
		t.Fatalf("load info %+v; want 200 snapshot keys, 40 quotas from the store, superseding 40", info)
	}
	if got := st2.LastSave(); got != t0/1e9 {
		t.Fatalf("LastSave %d, want the loaded snapshot's %d", got, t0/1e9)
	}
}

// Keys that expired while the server was down are restored as they were
// (the state is taken at the instant it was saved at, no other) and read
// as absent once time has passed their expiry.
func TestStoreRestoresAsSaved(t *testing.T) {
	fs := vfs.NewMem()
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, fs, FsyncEverySec, ks, clk)
	fillEveryKind(t, ks, 40, t0)
	journalQuotas(t, st, ks, t0)
	mustOK(t, st.Close())

	// 35 s later: the GCRA keys 1..35 s out, the fixed windows (60 s) and
	// some leases have gone; quotas (months) have not.
	later := t0 + 35*int64(time.Second)
	want := dump(t, ks, later)
	clk.ns.Store(later)
	ks2 := keyspace.New()
	st2 := openStore(t, fs, FsyncEverySec, ks2, clk)
	defer st2.Close()
	sameKeys(t, dump(t, ks2, later), want)
	sameKeys(t, dump(t, ks2, t0), dump(t, ks, t0))
	if len(want) == 240 {
		t.Fatal("nothing expired in 35 s; the test tests nothing")
	}
	if info := st2.Loaded(); info.Expired != 0 {
		t.Fatalf("%d keys dropped as expired, though all were live when saved", info.Expired)
	}
}

// With FsyncAlways, a change is on disk once Wait returns: a crash (a
// clone of only what was synced) keeps all of them.
func TestStoreAlwaysSurvivesCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, fs, FsyncAlways, ks, clk)
	want := map[string]keyDump{}
	for i := range 100 {
		key := fmt.Sprintf("q%d", i%10)
		q := quotaState(t, t0, 1000, int64(i+1), "UTC")
		put(t, ks, key, keyspace.KindQuota, q.ExpireAt(), q)
		mustOK(t, st.Wait(st.QuotaChanged([]byte(key), q)))
		b, _ := machine.EncodeState(nil, keyspace.KindQuota, q)
		want[key] = keyDump{keyspace.KindQuota, q.ExpireAt(), string(b)}
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	defer st.Close()

	ks2 := keyspace.New()
	st2 := openStore(t, crashed, FsyncAlways, ks2, clk)
	defer st2.Close()
	sameKeys(t, dump(t, ks2, t0), want)
}

// Without a sync, a crash may lose the last changes; after a sync it does
// not. (Everysec's timer is what calls syncWAL in production.)
func TestStoreEverySecSyncs(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, fs, FsyncEverySec, ks, clk)
	defer st.Close()
	q := quotaState(t, t0, 1000, 7, "UTC")
	put(t, ks, "q", keyspace.KindQuota, q.ExpireAt(), q)
	seq := st.QuotaChanged([]byte("q"), q)
	if seq != 0 {
		t.Fatalf("everysec ticket %d: replies should not wait", seq)
	}
	// Wait for the writer to commit, then sync as the timer would.
	waitFor(t, func() bool { st.j.mu.Lock(); defer st.j.mu.Unlock(); return st.j.committed >= 1 })
	st.j.syncWAL()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	ks2 := keyspace.New()
	st2 := openStore(t, crashed, FsyncEverySec, ks2, clk)
	defer st2.Close()
	if n := st2.Loaded().QuotaKeys; n != 1 {
		t.Fatalf("%d quota keys after a synced crash, want 1", n)
	}
}

// waitFor polls cond for a background goroutine's progress.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A quota deleted after the snapshot stays deleted across a crash, though
// the snapshot still holds it.
func TestStoreDeleteAfterSnapshot(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, fs, FsyncAlways, ks, clk)
	defer st.Close()
	for _, k := range []string{"keep", "gone"} {
		q := quotaState(t, t0, 10, 3, "UTC")
		put(t, ks, k, keyspace.KindQuota, q.ExpireAt(), q)
		mustOK(t, st.Wait(st.QuotaChanged([]byte(k), q)))
	}
	mustOK(t, st.Save())
	s, at := ks.LockKey([]byte("gone")), int64(t0)
	e, _ := s.Get([]byte("gone"), at)
	s.Delete(e)
	seq := st.QuotaDeleted([]byte("gone"))
	s.Unlock()
	mustOK(t, st.Wait(seq))

	ks2 := keyspace.New()
	st2 := openStore(t, fs.CrashClone(vfs.CrashCloneCfg{}), FsyncAlways, ks2, clk)
	defer st2.Close()
	got := dump(t, ks2, t0)
	if _, ok := got["gone"]; ok || len(got) != 1 {
		t.Fatalf("after the crash: %v; want only keep", got)
	}
}

// A FLUSHALL journaled after the snapshot empties what the snapshot holds,
// of every kind; quotas written after the flush survive.
func TestStoreFlushAfterSnapshot(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, fs, FsyncAlways, ks, clk)
	defer st.Close()
	fillEveryKind(t, ks, 5, t0)
	mustOK(t, st.Wait(journalQuotas(t, st, ks, t0)))
	mustOK(t, st.Save())
	var seq uint64
	ks.FlushAll(func(func(int) *keyspace.Slot) { seq = st.Flushed() })
	mustOK(t, st.Wait(seq))
	q := quotaState(t, t0, 10, 1, "UTC")
	put(t, ks, "after", keyspace.KindQuota, q.ExpireAt(), q)
	mustOK(t, st.Wait(st.QuotaChanged([]byte("after"), q)))
	want := dump(t, ks, t0)

	ks2 := keyspace.New()
	st2 := openStore(t, fs.CrashClone(vfs.CrashCloneCfg{}), FsyncAlways, ks2, clk)
	defer st2.Close()
	sameKeys(t, dump(t, ks2, t0), want)
	if info := st2.Loaded(); info.Superseded != 30 || info.QuotaKeys != 1 {
		t.Fatalf("load %+v; want the 30 snapshot keys superseded, 1 quota", info)
	}
}

// Deleting the snapshot file of a data directory that has written one is
// refused, not treated as an empty start.
func TestStoreMissingSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, fs, FsyncEverySec, ks, clk)
	put(t, ks, "g", keyspace.KindGCRA, t0+1e12, nil)
	mustOK(t, st.Close())
	mustOK(t, fs.Remove(fs.PathJoin(dir, SnapshotFile)))
	_, err := tryOpen(fs, FsyncEverySec, keyspace.New(), clk)
	if !errors.Is(err, ErrMissingSnapshot) || !strings.Contains(err.Error(), "/data/snapshot.sluice") {
		t.Fatalf("Open without the snapshot: %v", err)
	}
}

// A damaged snapshot stops Open with an error naming the file.
func TestStoreCorruptSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, fs, FsyncEverySec, ks, clk)
	fillEveryKind(t, ks, 3, t0)
	mustOK(t, st.Close())
	path := fs.PathJoin(dir, SnapshotFile)
	good := readFile(t, fs, path)
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"flipped byte", func() []byte { b := append([]byte(nil), good...); b[len(b)/2] ^= 0x10; return b }(), ErrCorruptSnapshot},
		{"truncated", good[:len(good)-9], ErrCorruptSnapshot},
		{"empty", nil, ErrNotSnapshot},
		{"not a snapshot", []byte("hello"), ErrNotSnapshot},
	} {
		writeFile(t, fs, path, tc.data)
		_, err := tryOpen(fs, FsyncEverySec, keyspace.New(), clk)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: Open = %v; want %v naming %s", tc.name, err, tc.want, path)
		}
	}
	writeFile(t, fs, path, good)
	st = openStore(t, fs, FsyncEverySec, keyspace.New(), clk)
	mustOK(t, st.Close())
}

// A damaged quota store stops Open with an error naming it.
func TestStoreCorruptQuotaStore(t *testing.T) {
	clk := newClock(t0)
	setup := func() *vfs.MemFS {
		fs := vfs.NewMem()
		ks := keyspace.New()
		st := openStore(t, fs, FsyncEverySec, ks, clk)
		q := quotaState(t, t0, 10, 1, "UTC")
		put(t, ks, "q", keyspace.KindQuota, q.ExpireAt(), q)
		st.QuotaChanged([]byte("q"), q)
		mustOK(t, st.Close())
		return fs
	}
	storeDir := "/data/" + QuotaStoreDir

	// Its files replaced by garbage.
	// (A damaged write-ahead log tail is what a crash during a write
	// leaves; Pebble replays up to it, as it must.)
	for _, name := range []string{"MANIFEST-"} {
		fs := setup()
		names, err := fs.List(storeDir)
		mustOK(t, err)
		for _, n := range names {
			if strings.HasPrefix(n, name) {
				writeFile(t, fs, fs.PathJoin(storeDir, n), []byte("garbage"))
			}
		}
		_, err = tryOpen(fs, FsyncEverySec, keyspace.New(), clk)
		if err == nil || !strings.Contains(err.Error(), storeDir) {
			t.Errorf("%s overwritten: Open = %v; want an error naming %s", name, err, storeDir)
		}
	}

	// A flipped byte in a table fails its block checksum.
	fs := setup()
	db, err := pebble.Open(storeDir, &pebble.Options{FS: fs})
	mustOK(t, err)
	mustOK(t, db.Flush())
	mustOK(t, db.Close())
	names, err := fs.List(storeDir)
	mustOK(t, err)
	flipped := false
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			p := fs.PathJoin(storeDir, n)
			b := readFile(t, fs, p)
			b[10] ^= 0xff
			writeFile(t, fs, p, b)
			flipped = true
		}
	}
	if !flipped {
		t.Fatal("no table to damage")
	}
	if _, err := tryOpen(fs, FsyncEverySec, keyspace.New(), clk); err == nil || !strings.Contains(err.Error(), storeDir) {
		t.Errorf("damaged table: Open = %v; want an error naming %s", err, storeDir)
	}

	// Every file deleted but one: never a fresh, empty store.
	fs = setup()
	names, err = fs.List(storeDir)
	mustOK(t, err)
	for _, n := range names {
		if !strings.HasPrefix(n, "OPTIONS") {
			mustOK(t, fs.Remove(fs.PathJoin(storeDir, n)))
		}
	}
	if _, err := tryOpen(fs, FsyncEverySec, keyspace.New(), clk); err == nil || !strings.Contains(err.Error(), storeDir) {
		t.Errorf("store files deleted: Open = %v; want an error naming %s", err, storeDir)
	}

	// A record that does not decode.
	fs = setup()
	db, err = pebble.Open(storeDir, &pebble.Options{FS: fs})
	mustOK(t, err)
	bad := binary.LittleEndian.AppendUint64(nil, uint64(t0+1e15)) // live long after t0
	bad = append(bad, 0xff, 0xff)                                 // not a quota state
	mustOK(t, db.Set(appendQuotaKey(nil, []byte("bad")), bad, pebble.Sync))
	mustOK(t, db.Close())
	_, err = tryOpen(fs, FsyncEverySec, keyspace.New(), clk)
	if !errors.Is(err, ErrCorruptStore) || !strings.Contains(err.Error(), storeDir) || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("bad record: Open = %v; want ErrCorruptStore naming %s and the key", err, storeDir)
	}
}

// A data directory that lost its quota store is refused, naming it (its
// quotas were newer than the snapshot's); with RebuildQuotaStore it takes
// the snapshot's quotas and writes them to the new store.
func TestStoreSeedsFreshStoreFromSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, fs, FsyncEverySec, ks, clk)
	fillEveryKind(t, ks, 4, t0)
	mustOK(t, st.Close())
	want := dump(t, ks, t0)
	storeDir := fs.PathJoin(dir, QuotaStoreDir)
	mustOK(t, fs.RemoveAll(storeDir))

	for range 2 { // the refusal leaves nothing that would pass next time
		_, err := tryOpen(fs, FsyncEverySec, keyspace.New(), clk)
		if !errors.Is(err, ErrMissingStore) || !strings.Contains(err.Error(), storeDir) {
			t.Fatalf("Open without its quota store: %v", err)
		}
	}

	ks2 := keyspace.New()
	st2, err := Open(Options{Dir: dir, QuotaFsync: FsyncEverySec, FS: fs, RebuildQuotaStore: true}, Deps{Keys: ks2, Now: clk.Now, Applied: clk.Now})
	mustOK(t, err)
	sameKeys(t, dump(t, ks2, t0), want)
	mustOK(t, st2.Close())
	// The store now has them: they come from it, not the snapshot.
	st3 := openStore(t, fs, FsyncEverySec, keyspace.New(), clk)
	defer st3.Close()
	if info := st3.Loaded(); info.QuotaKeys != 4 {
		t.Fatalf("load %+v; want 4 quotas from the store", info)
	}
}

// SAVE fails while a background save runs; BGSAVE SCHEDULE queues one.
func TestStoreSaveWhileBackgroundSave(t *testing.T) {
	gate := newGateFS(vfs.NewMem())
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, gate, FsyncEverySec, ks, clk)
	defer st.Close()
	put(t, ks, "g", keyspace.KindGCRA, t0+1e12, nil)
	gate.close()
	started, err := st.BackgroundSave(false)
	if !started || err != nil {
		t.Fatalf("first BGSAVE: %v %v", started, err)
	}
	gate.waitBlocked(t)
	if err := st.Save(); !errors.Is(err, ErrSaveInProgress) {
		t.Fatalf("SAVE during BGSAVE: %v", err)
	}
	if _, err := st.BackgroundSave(false); !errors.Is(err, ErrSaveInProgress) {
		t.Fatalf("second BGSAVE: %v", err)
	}
	if started, err := st.BackgroundSave(true); started || err != nil {
		t.Fatalf("BGSAVE SCHEDULE: %v %v", started, err)
	}
	gate.open()
	waitFor(t, func() bool { return !st.bgRunning.Load() })
	if got := st.LastSnapshot(); got.Keys != 1 {
		t.Fatalf("last snapshot %+v", got)
	}
	st.mu.Lock()
	saves := st.saves
	st.mu.Unlock()
	if saves != 2 {
		t.Fatalf("%d saves, want 2 (the scheduled one ran)", saves)
	}
}

// After a snapshot the store sheds quota records that expired.
func TestStoreSweepsExpiredRecords(t *testing.T) {
	fs := vfs.NewMem()
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, fs, FsyncEverySec, ks, clk)
	defer st.Close()
	sch, err := quota.NewSchedule(quota.Hour, 0, false, "UTC")
	mustOK(t, err)
	for i := range 10000 {
		q, _, _, err := quota.Check(quota.State{}, false, t0, 5, sch, 1)
		mustOK(t, err)
		st.QuotaChanged([]byte(fmt.Sprintf("h%d", i)), &q)
	}
	// Records still queued when a sweep passes their place are left for
	// the next one: let the writer store them all first.
	waitFor(t, func() bool { st.j.mu.Lock(); defer st.j.mu.Unlock(); return st.j.committed == st.j.seq })
	clk.ns.Store(t0 + 3*int64(time.Hour)) // two periods later: all expired
	mustOK(t, st.Save())
	waitFor(t, func() bool {
		st.j.mu.Lock()
		defer st.j.mu.Unlock()
		return st.j.gc.removed == 10000 && !st.j.gc.active
	})
}
