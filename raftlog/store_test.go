package raftlog

import (
	"errors"
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

func TestEmptyLog(t *testing.T) {
	s := openMem(t, vfs.NewMem(), "raft")
	wantBounds(t, s, 0, 0)
	wantEntries(t, s, 1, 0, 3)
}

func TestStoreLogAndStoreLogs(t *testing.T) {
	s := openMem(t, vfs.NewMem(), "raft")
	if err := s.StoreLog(entry(1)); err != nil {
		t.Fatal(err)
	}
	wantBounds(t, s, 1, 1)
	if err := s.StoreLogs(entries(2, 64)); err != nil {
		t.Fatal(err)
	}
	wantBounds(t, s, 1, 64)
	wantEntries(t, s, 1, 64, 66)
	if err := s.StoreLogs(nil); err != nil {
		t.Fatalf("StoreLogs(nil): %v", err)
	}
	wantBounds(t, s, 1, 64)
}

func TestStoreLogsOverwritesAndLeavesGaps(t *testing.T) {
	s := openMem(t, vfs.NewMem(), "raft")
	if err := s.StoreLogs(entries(5, 7)); err != nil {
		t.Fatal(err)
	}
	// A new leader rewrites index 6 with another term.
	other := entry(6)
	other.Term, other.Data = 99, []byte("rewritten")
	if err := s.StoreLog(other); err != nil {
		t.Fatal(err)
	}
	var got raft.Log
	if err := s.GetLog(6, &got); err != nil || !sameLog(&got, other) {
		t.Fatalf("GetLog(6) = %+v, %v; want the rewrite %+v", got, err, *other)
	}
	// After a snapshot install raft appends past a gap.
	if err := s.StoreLog(entry(100)); err != nil {
		t.Fatal(err)
	}
	wantBounds(t, s, 5, 100)
	if err := s.GetLog(50, &got); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog in the gap = %v, want raft.ErrLogNotFound", err)
	}
}

func TestDeleteRange(t *testing.T) {
	s := openMem(t, vfs.NewMem(), "raft")
	if err := s.StoreLogs(entries(1, 20)); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name           string
		lo, hi         uint64
		first, last    uint64
		keepLo, keepHi uint64
	}{
		{"head after a snapshot", 1, 5, 6, 20, 6, 20},
		{"head already gone", 0, 3, 6, 20, 6, 20},
		{"tail of a deposed leader", 15, 20, 6, 14, 6, 14},
		{"empty range", 10, 9, 6, 14, 6, 14},
		{"range past the end", 13, math.MaxUint64, 6, 12, 6, 12},
		{"everything", 0, math.MaxUint64, 0, 0, 1, 0},
	}
	for _, st := range steps {
		if err := s.DeleteRange(st.lo, st.hi); err != nil {
			t.Fatalf("%s: DeleteRange(%d, %d): %v", st.name, st.lo, st.hi, err)
		}
		wantBounds(t, s, st.first, st.last)
		wantEntries(t, s, st.keepLo, st.keepHi, 21)
	}
	// The log is usable again after it was emptied.
	if err := s.StoreLogs(entries(30, 31)); err != nil {
		t.Fatal(err)
	}
	wantBounds(t, s, 30, 31)
}

func TestDeleteRangeInTheMiddle(t *testing.T) {
	s := openMem(t, vfs.NewMem(), "raft")
	if err := s.StoreLogs(entries(1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(4, 6); err != nil {
		t.Fatal(err)
	}
	wantBounds(t, s, 1, 10)
	wantEntries(t, s, 1, 3, 3)
	wantEntries(t, s, 7, 10, 0)
}

func TestStableStore(t *testing.T) {
	s := openMem(t, vfs.NewMem(), "raft")
	// Missing keys: raft recognises a fresh store by this exact text.
	v, err := s.Get([]byte("LastVoteCand"))
	if !errors.Is(err, ErrKeyNotFound) || err.Error() != "not found" || v != nil {
		t.Fatalf("Get(missing) = %q, %v; want nil, \"not found\"", v, err)
	}
	n, err := s.GetUint64([]byte("CurrentTerm"))
	if !errors.Is(err, ErrKeyNotFound) || err.Error() != "not found" || n != 0 {
		t.Fatalf("GetUint64(missing) = %d, %v; want 0, \"not found\"", n, err)
	}

	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("empty"), []byte{}); err != nil {
		t.Fatal(err)
	}
	for _, term := range []uint64{1, 7, math.MaxUint64} {
		if err := s.SetUint64([]byte("CurrentTerm"), term); err != nil {
			t.Fatal(err)
		}
		if n, err := s.GetUint64([]byte("CurrentTerm")); err != nil || n != term {
			t.Fatalf("GetUint64 = %d, %v; want %d", n, err, term)
		}
	}
	v, err = s.Get([]byte("LastVoteCand"))
	if err != nil || string(v) != "n2" {
		t.Fatalf("Get = %q, %v; want n2", v, err)
	}
	v[0] = 'X' // the caller owns the copy
	if v, _ := s.Get([]byte("LastVoteCand")); string(v) != "n2" {
		t.Fatalf("Get after changing the returned slice = %q, want n2", v)
	}
	if v, err := s.Get([]byte("empty")); err != nil || len(v) != 0 {
		t.Fatalf("Get(empty value) = %q, %v; want an empty value", v, err)
	}
	// A key set with Set but read as a number is corrupt, not a panic.
	if _, err := s.GetUint64([]byte("LastVoteCand")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetUint64 of a 2-byte value = %v, want ErrCorrupt", err)
	}
	// Stable keys do not show up as log entries.
	wantBounds(t, s, 0, 0)
}

func TestReopenKeepsEverything(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, "raft")
	if err := s.StoreLogs(entries(1, 30)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 9); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, "raft")
	wantBounds(t, s, 10, 30)
	wantEntries(t, s, 10, 30, 31)
	if n, err := s.GetUint64([]byte("CurrentTerm")); err != nil || n != 42 {
		t.Fatalf("GetUint64 after reopen = %d, %v; want 42", n, err)
	}
}

// TestEveryWriteIsSynced crashes the file system after each kind of write,
// keeping only what was synced: each write must survive.
func TestEveryWriteIsSynced(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openMem(t, fs, "raft")
	crashed := func() *Store {
		t.Helper()
		return openMem(t, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), "raft")
	}

	if err := s.StoreLog(entry(1)); err != nil {
		t.Fatal(err)
	}
	wantEntries(t, crashed(), 1, 1, 2)
	if err := s.StoreLogs(entries(2, 10)); err != nil {
		t.Fatal(err)
	}
	wantEntries(t, crashed(), 1, 10, 11)
	if err := s.DeleteRange(1, 4); err != nil {
		t.Fatal(err)
	}
	c := crashed()
	wantBounds(t, c, 5, 10)
	wantEntries(t, c, 5, 10, 11)
	if err := s.Set([]byte("LastVoteCand"), []byte("n3")); err != nil {
		t.Fatal(err)
	}
	if v, err := crashed().Get([]byte("LastVoteCand")); err != nil || string(v) != "n3" {
		t.Fatalf("vote after a crash = %q, %v; want n3", v, err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 5); err != nil {
		t.Fatal(err)
	}
	if n, err := crashed().GetUint64([]byte("CurrentTerm")); err != nil || n != 5 {
		t.Fatalf("term after a crash = %d, %v; want 5", n, err)
	}
}

func TestCorruptEntryIsAnError(t *testing.T) {
	s := openMem(t, vfs.NewMem(), "raft")
	if err := s.StoreLogs(entries(1, 2)); err != nil {
		t.Fatal(err)
	}
	// Overwrite index 1 with a truncated record and index 2 with the
	// record of another index, behind the store's back.
	rec := appendRecord(nil, entry(1))
	if err := s.db.Set(logKey(1), rec[:len(rec)-3], nil); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(logKey(2), rec, nil); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 2; i++ {
		var got raft.Log
		if err := s.GetLog(i, &got); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("GetLog(%d) of a corrupt record = %v, want ErrCorrupt", i, err)
		}
	}
}

func TestClosedStore(t *testing.T) {
	s := openMem(t, vfs.NewMem(), "raft")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	var l raft.Log
	_, errFirst := s.FirstIndex()
	_, errLast := s.LastIndex()
	_, errGet := s.Get([]byte("k"))
	_, errGetU := s.GetUint64([]byte("k"))
	for name, err := range map[string]error{
		"FirstIndex": errFirst, "LastIndex": errLast, "GetLog": s.GetLog(1, &l),
		"StoreLog": s.StoreLog(entry(1)), "DeleteRange": s.DeleteRange(1, 2),
		"Set": s.Set([]byte("k"), nil), "SetUint64": s.SetUint64([]byte("k"), 1),
		"Get": errGet, "GetUint64": errGetU,
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

func TestOptions(t *testing.T) {
	if err := DefaultOptions("d").Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := map[string]Options{
		"no dir":         {MemTableSize: 16 << 20},
		"zero memtable":  {Dir: "d"},
		"huge memtable":  {Dir: "d", MemTableSize: 4 << 30},
		"small memtable": {Dir: "d", MemTableSize: 1024},
	}
	for name, o := range bad {
		if err := o.Validate(); !errors.Is(err, ErrOptions) {
			t.Errorf("%s: Validate = %v, want ErrOptions", name, err)
		}
		o.FS = vfs.NewMem()
		if s, err := Open(o); !errors.Is(err, ErrOptions) {
			if s != nil {
				_ = s.Close()
			}
			t.Errorf("%s: Open = %v, want ErrOptions", name, err)
		}
	}
}

// A directory that holds files but lost its database is refused: starting
// with an empty log would forget this node's vote.
func TestOpenRefusesADirectoryWithoutItsDatabase(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("raft", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("raft/stray", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	o := DefaultOptions("raft")
	o.FS = fs
	if s, err := Open(o); err == nil {
		_ = s.Close()
		t.Fatal("Open of a directory without a database succeeded")
	}
}
