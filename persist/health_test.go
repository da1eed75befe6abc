package persist

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/keyspace"
)

// fullFS is a file system whose writes fail with ENOSPC while full is set,
// as a full disk's do.
type fullFS struct {
	vfs.FS
	full *atomic.Bool
}

func (fs fullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.full.Load() {
		return nil, &errnoErr{"create " + name}
	}
	f, err := fs.FS.Create(name, c)
	return fullFile{f, fs.full}, err
}

func (fs fullFS) ReuseForWrite(o, n string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.full.Load() {
		return nil, &errnoErr{"create " + n}
	}
	f, err := fs.FS.ReuseForWrite(o, n, c)
	return fullFile{f, fs.full}, err
}

type fullFile struct {
	vfs.File
	full *atomic.Bool
}

func (f fullFile) Write(p []byte) (int, error) {
	if f.full.Load() {
		return 0, &errnoErr{"write"}
	}
	return f.File.Write(p)
}

func (f fullFile) WriteAt(p []byte, off int64) (int, error) {
	if f.full.Load() {
		return 0, &errnoErr{"write"}
	}
	return f.File.WriteAt(p, off)
}

type errnoErr struct{ op string }

func (e *errnoErr) Error() string { return e.op + ": " + syscall.ENOSPC.Error() }
func (e *errnoErr) Unwrap() error { return syscall.ENOSPC }

// waitErr waits for Wait(seq) in the background, so a test can tell a
// wait that ended from one still blocked.
func waitErr(st *Store, seq uint64) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- st.Wait(seq) }()
	return ch
}

func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A disk that fills up makes quota writes fail with ErrJournal and the
// cause, never the process; acknowledged changes stay; once space is freed
// the store heals by itself and every change reaches the disk.
func TestFullDiskFailsQuotaWritesThenHeals(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncEverySec, FsyncNo} {
		t.Run(policy.String(), func(t *testing.T) {
			full := &atomic.Bool{}
			fs := fullFS{FS: vfs.NewMem(), full: full}
			clk := newClock(t0)
			ks := keyspace.New()
			st := openStore(t, fs, policy, ks, clk)
			acked := map[string]int64{}
			check := func(key string, cost int64) uint64 {
				q := quotaState(t, clk.Now(), 1000, cost, "UTC")
				seq := st.QuotaChanged([]byte(key), q)
				put(t, ks, key, keyspace.KindQuota, q.ExpireAt(), q)
				return seq
			}
			for i := range 10 {
				mustOK(t, st.Wait(check("a", int64(i+1))))
				acked["a"] = int64(i + 1)
			}
			if policy != FsyncAlways {
				st.j.syncWAL() // what the background sync would do
			}

			full.Store(true)
			if policy == FsyncAlways {
				err := <-waitErr(st, check("a", 99))
				if !errors.Is(err, ErrJournal) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("Wait on a full disk: %v", err)
				}
			} else {
				check("a", 99)
				seq := st.j.lastSeq() // QuotaChanged returns 0: nothing to wait for
				within(t, "the change written", func() bool {
					st.j.mu.Lock()
					defer st.j.mu.Unlock()
					return st.j.committed >= seq
				})
				go st.j.syncWAL() // what the background sync would do
			}
			within(t, "Err reports the full disk", func() bool { return st.Err() != nil })
			if err := st.Err(); !errors.Is(err, ErrJournal) || !strings.Contains(err.Error(), "no space left on device") {
				t.Fatalf("Err on a full disk: %v", err)
			}
			if got := fieldOf(st.Info(), "sluice_quota_status"); got != "err" {
				t.Errorf("sluice_quota_status %q", got)
			}

			full.Store(false)
			within(t, "Err clears once the disk has room", func() bool { return st.Err() == nil })
			seq := check("a", 7)
			acked["a"] = 7
			mustOK(t, st.Wait(seq))
			mustOK(t, st.Close())

			ks2 := keyspace.New()
			st2 := openStore(t, fs, policy, ks2, clk)
			defer st2.Close()
			sameKeys(t, dump(t, ks2, clk.Now()), dump(t, ks, clk.Now()))
		})
	}
}

// Closing while the disk is full returns the fault instead of hanging.
func TestCloseOnFullDiskDoesNotHang(t *testing.T) {
	full := &atomic.Bool{}
	fs := fullFS{FS: vfs.NewMem(), full: full}
	clk := newClock(t0)
	ks := keyspace.New()
	st := openStore(t, fs, FsyncAlways, ks, clk)
	full.Store(true)
	q := quotaState(t, clk.Now(), 1000, 1, "UTC")
	<-waitErr(st, st.QuotaChanged([]byte("a"), q))
	done := make(chan error, 1)
	go func() { done <- st.Close() }()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Close on a full disk: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs on a full disk")
	}
}

// A data directory on a disk too full to open the store is refused at
// once, naming the directory and the cause.
func TestOpenOnFullDiskRefuses(t *testing.T) {
	mem := vfs.NewMem()
	clk := newClock(t0)
	st := openStore(t, mem, FsyncAlways, keyspace.New(), clk)
	mustOK(t, st.Close())
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 10, TotalBytes: 48 << 20, UsedBytes: 48<<20 - 1<<10})
	_, err := tryOpen(mem, FsyncAlways, keyspace.New(), clk)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open on a full disk: %v", err)
	}
}

func fieldOf(fields [][2]string, name string) string {
	for _, f := range fields {
		if f[0] == name {
			return f[1]
		}
	}
	return ""
}
