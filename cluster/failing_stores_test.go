package cluster

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sluice-rl/sluice/internal/failpoint"
)

// The robustness suite's disk failpoints: a log write that fails stores
// nothing; a snapshot that fails as it is closed is not kept, one that
// does not fail is.
func TestFailingStores(t *testing.T) {
	points, err := failpoint.Parse("raftlog-write=error,snapshot-before-close=error")
	if err != nil {
		t.Fatal(err)
	}
	logs := failingLog{LogStore: raft.NewInmemStore(), points: points}
	// A group's first entry (its bootstrap) is written whatever the points:
	// the faults are for a running group.
	if err := logs.StoreLogs([]*raft.Log{{Index: 1, Term: 1}}); err != nil {
		t.Fatalf("the first entry: %v", err)
	}
	if err := logs.StoreLogs([]*raft.Log{{Index: 2, Term: 1}}); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("a failing write: %v", err)
	}
	if last, _ := logs.LastIndex(); last != 1 {
		t.Fatalf("a failed write stored entries up to %d", last)
	}

	// The wrapper says what the store says of gaps: Raft clears a store
	// that takes none after a snapshot's install, and compacts the others.
	if logs.IsMonotonic() {
		t.Fatal("an in-memory store wrapped reads as monotonic")
	}
	wal, _, closer, err := openWALStores(filepath.Join(t.TempDir(), walDir), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	var wrapped raft.LogStore = failingLog{LogStore: wal, points: points}
	if m, ok := wrapped.(raft.MonotonicLogStore); !ok || !m.IsMonotonic() {
		t.Fatal("raft-wal wrapped does not read as monotonic: a follower's log would keep a gap after a snapshot")
	}

	dir := t.TempDir()
	files, err := raft.NewFileSnapshotStore(dir, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	write := func(snaps raft.SnapshotStore, index uint64) error {
		sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Write([]byte("state")); err != nil {
			t.Fatal(err)
		}
		return sink.Close()
	}
	if err := write(failingSnapshots{SnapshotStore: files, points: points}, 5); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("a failing snapshot: %v", err)
	}
	if list, _ := files.List(); len(list) != 0 {
		t.Fatalf("a failed snapshot kept: %v", list)
	}
	// Dropped, not left half made: no temporary snapshot stays behind.
	if left, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*")); len(left) != 0 {
		t.Fatalf("a failed snapshot left %v", left)
	}
	if err := write(failingSnapshots{SnapshotStore: files, points: nil}, 6); err != nil {
		t.Fatal(err)
	}
	if list, _ := files.List(); len(list) != 1 || list[0].Index != 6 {
		t.Fatalf("snapshots: %v", list)
	}
}
