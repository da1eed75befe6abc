package persist

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/keyspace"
)

// copyDir replaces dst on to with src on from (flat: a Pebble directory).
func copyDir(t *testing.T, from vfs.FS, src string, to vfs.FS, dst string) {
	t.Helper()
	mustOK(t, to.RemoveAll(dst))
	mustOK(t, to.MkdirAll(dst, 0o755))
	names, err := from.List(src)
	mustOK(t, err)
	for _, n := range names {
		writeFile(t, to, to.PathJoin(dst, n), readFile(t, from, from.PathJoin(src, n)))
	}
}

// A quota store that holds fewer changes than the snapshot (its log lost
// writes it had synced: damaged, truncated, or an old copy put back) is
// refused, naming it; RebuildQuotaStore takes the snapshot's quotas
// instead, and says so.
func TestStoreBehindSnapshotRefuses(t *testing.T) {
	fs := vfs.NewCrashableMem()
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, fs, FsyncAlways, ks, clk)
	mustOK(t, st.Wait(journalQuotas(t, st, ks, t0)))
	mustOK(t, st.Close())
	old := fs.CrashClone(vfs.CrashCloneCfg{})

	st = openStore(t, fs, FsyncAlways, ks, clk)
	for i := range 5 {
		q := quotaState(t, t0, 100, int64(i+1), "UTC")
		mustOK(t, st.Wait(st.QuotaChanged([]byte("late"), q)))
		put(t, ks, "late", keyspace.KindQuota, q.ExpireAt(), q)
	}
	mustOK(t, st.Save())
	want := dump(t, ks, t0)
	mustOK(t, st.Close())

	storeDir := fs.PathJoin(dir, QuotaStoreDir)
	copyDir(t, old, storeDir, fs, storeDir)
	_, err := tryOpen(fs, FsyncAlways, keyspace.New(), clk)
	if !errors.Is(err, ErrStoreBehind) || !strings.Contains(err.Error(), storeDir) {
		t.Fatalf("Open with a store behind its snapshot: %v", err)
	}

	ks2 := keyspace.New()
	st2, err := Open(Options{Dir: dir, QuotaFsync: FsyncAlways, FS: fs, RebuildQuotaStore: true}, Deps{Keys: ks2, Now: clk.Now, Applied: clk.Now})
	mustOK(t, err)
	sameKeys(t, dump(t, ks2, t0), want)
	mustOK(t, st2.Close())
	st3 := openStore(t, fs, FsyncAlways, keyspace.New(), clk) // healed: no flag needed
	mustOK(t, st3.Close())
}

// RebuildQuotaStore leaves a sound store alone: its quotas, newer than the
// snapshot's, are kept, so the flag is safe to leave on.
func TestRebuildKeepsASoundStore(t *testing.T) {
	fs := vfs.NewMem()
	clk := newClock(t0)
	ks := keyspace.New()
	opts := Options{Dir: dir, QuotaFsync: FsyncAlways, FS: fs, RebuildQuotaStore: true}
	st, err := Open(opts, Deps{Keys: ks, Now: clk.Now, Applied: clk.Now})
	mustOK(t, err)
	q := quotaState(t, t0, 100, 1, "UTC")
	mustOK(t, st.Wait(st.QuotaChanged([]byte("k"), q)))
	put(t, ks, "k", keyspace.KindQuota, q.ExpireAt(), q)
	mustOK(t, st.Save())
	q = quotaState(t, t0, 100, 9, "UTC")
	mustOK(t, st.Wait(st.QuotaChanged([]byte("k"), q)))
	put(t, ks, "k", keyspace.KindQuota, q.ExpireAt(), q)
	want := dump(t, ks, t0)
	st.j.close() // a crash: no shutdown snapshot
	st.db.Close()
	st.lock.Close()

	ks2 := keyspace.New()
	st2, err := Open(opts, Deps{Keys: ks2, Now: clk.Now, Applied: clk.Now})
	mustOK(t, err)
	defer st2.Close()
	sameKeys(t, dump(t, ks2, t0), want)
	if names, _ := fs.List("/"); len(names) != 1 {
		t.Errorf("files at the root: %v (a store moved aside?)", names)
	}
	if names, _ := fs.List(dir); strings.Contains(strings.Join(names, " "), "damaged") {
		t.Errorf("a sound store was moved aside: %v", names)
	}
}
