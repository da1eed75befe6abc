package cluster

import (
	"testing"
	"time"
)

// A deferred sync returns at once and the file is synced by the timer, or
// at the latest when it closes.
func TestIntervalFSDefersSyncs(t *testing.T) {
	v := newIntervalFS(time.Hour, quietLog())
	defer v.Close()
	dir := t.TempDir()
	f, err := v.Create(dir, "seg", 1024)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("entry"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	v.mu.Lock()
	pending := len(v.dirty)
	v.mu.Unlock()
	if pending != 1 {
		t.Fatalf("%d files wait for a sync, want 1", pending)
	}
	v.syncDirty()
	v.mu.Lock()
	pending = len(v.dirty)
	v.mu.Unlock()
	if pending != 0 {
		t.Fatal("the timer's round left a file unsynced")
	}
	f.Sync()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.dirty) != 0 {
		t.Fatal("a closed file is still waiting for the timer")
	}
}
