package persist

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/window"
)

// benchKeys is how many live keys the snapshot and startup benchmarks use;
// SLUICE_BENCH_KEYS overrides it.
func benchKeys() int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_KEYS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// fillBench fills ks with n keys of the given mix at t0: "gcra" (the
// smallest records), "quota" (journaled to st as QUOTA.CHECK would), or
// "mixed" (GCRA, sliding counters and quotas in equal parts).
func fillBench(b *testing.B, ks *keyspace.Keyspace, st *Store, mix string, n int) {
	b.Helper()
	sch, err := quota.NewSchedule(quota.Month, t0-40*86400e9, true, "Europe/Berlin")
	mustOK(b, err)
	params, err := window.NewParams(100, 60)
	mustOK(b, err)
	key := make([]byte, 0, 32)
	for i := range n {
		key = strconv.AppendInt(append(key[:0], "user:"...), int64(i), 10)
		kind := mix
		if mix == "mixed" {
			kind = [...]string{"gcra", "sw", "quota"}[i%3]
		}
		switch kind {
		case "gcra":
			put(b, ks, string(key), keyspace.KindGCRA, t0+int64(1+i%3600)*1e9, nil)
		case "sw":
			c, _, exp, _, err := window.CounterState{}.Check(false, t0, params, 1)
			mustOK(b, err)
			put(b, ks, string(key), keyspace.KindSlidingCounter, exp, &c)
		case "quota":
			q, _, _, err := quota.Check(quota.State{}, false, t0, 10000, sch, int64(1+i%100))
			mustOK(b, err)
			put(b, ks, string(key), keyspace.KindQuota, q.ExpireAt(), &q)
			st.QuotaChanged(key, &q)
		}
	}
}

// prepare writes a data directory holding n keys of mix on disk.
func prepare(b *testing.B, mix string, n int) (string, vfs.FS) {
	b.Helper()
	fs := vfs.Default
	d := filepath.Join(b.TempDir(), "data")
	ks := keyspace.New()
	st, err := Open(Options{Dir: d, QuotaFsync: FsyncNo, FS: fs}, Deps{Keys: ks, Now: newClock(t0).Now, Applied: newClock(t0).Now})
	mustOK(b, err)
	fillBench(b, ks, st, mix, n)
	mustOK(b, st.Close()) // writes the snapshot
	return d, fs
}

// BenchmarkSnapshot is the time to snapshot a keyspace of benchKeys keys
// to disk (encode, write, fsync, rename), and the file's size.
func BenchmarkSnapshot(b *testing.B) {
	n := benchKeys()
	for _, mix := range []string{"gcra", "mixed", "quota"} {
		b.Run(fmt.Sprintf("%s-%d", mix, n), func(b *testing.B) {
			d := filepath.Join(b.TempDir(), "data")
			ks := keyspace.New()
			st, err := Open(Options{Dir: d, QuotaFsync: FsyncNo}, Deps{Keys: ks, Now: newClock(t0).Now, Applied: newClock(t0).Now})
			mustOK(b, err)
			defer st.Close()
			fillBench(b, ks, st, mix, n)
			var info SaveInfo
			b.ResetTimer()
			for b.Loop() {
				info, err = st.snapshot("bench")
				mustOK(b, err)
			}
			b.ReportMetric(float64(info.Bytes), "file-bytes")
			b.ReportMetric(float64(info.Bytes)/float64(info.Keys), "bytes/key")
		})
	}
}

// BenchmarkStartup is the time Open takes to restore benchKeys live keys:
// read and check the snapshot, insert its keys, and (for quotas) read the
// quota store over it.
func BenchmarkStartup(b *testing.B) {
	n := benchKeys()
	for _, mix := range []string{"gcra", "mixed", "quota"} {
		b.Run(fmt.Sprintf("%s-%d", mix, n), func(b *testing.B) {
			d, fs := prepare(b, mix, n)
			b.ResetTimer()
			for b.Loop() {
				ks := keyspace.New()
				st, err := Open(Options{Dir: d, QuotaFsync: FsyncNo, FS: fs}, Deps{Keys: ks, Now: newClock(t0).Now, Applied: newClock(t0).Now})
				mustOK(b, err)
				b.StopTimer()
				info := st.Loaded()
				if got := info.SnapshotKeys + info.QuotaKeys; got != int64(n) {
					b.Fatalf("restored %d keys, want %d", got, n)
				}
				// Close without the shutdown snapshot's cost in the loop.
				st.j.close()
				st.db.Close()
				b.StartTimer()
			}
		})
	}
}
