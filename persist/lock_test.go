package persist

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/keyspace"
)

// A second store on a data directory in use is refused, naming the
// process that holds it; once that one closes, the directory opens.
func TestDataDirInUseRefusesNamingThePID(t *testing.T) {
	d := t.TempDir()
	clk := newClock(t0)
	open := func() (*Store, error) {
		return Open(Options{Dir: d, QuotaFsync: FsyncAlways}, Deps{Keys: keyspace.New(), Now: clk.Now, Applied: clk.Now})
	}
	st, err := open()
	mustOK(t, err)
	_, err = open()
	want := "data directory " + d + " is in use by another sluice process (pid " + strconv.Itoa(os.Getpid()) + ")"
	if !errors.Is(err, ErrDirInUse) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second Open: %v, want %q", err, want)
	}
	mustOK(t, st.Close())
	st, err = open()
	mustOK(t, err)
	mustOK(t, st.Close())
}

// A snapshot left half-written by a crash is removed at startup.
func TestUnfinishedSnapshotRemovedAtStartup(t *testing.T) {
	fs := vfs.NewMem()
	clk := newClock(t0)
	mustOK(t, fs.MkdirAll(dir, 0o755))
	writeFile(t, fs, fs.PathJoin(dir, snapshotTemp), []byte("half a snapshot"))
	st := openStore(t, fs, FsyncAlways, keyspace.New(), clk)
	defer st.Close()
	if _, err := fs.Stat(fs.PathJoin(dir, snapshotTemp)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after Open: %v", snapshotTemp, err)
	}
}
