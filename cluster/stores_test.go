package cluster

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// exerciseStores checks the LogStore and StableStore contracts Raft relies
// on, across a close and reopen.
func exerciseStores(t *testing.T, open func() (raft.LogStore, raft.StableStore, io.Closer, error)) {
	t.Helper()
	logs, stable, closer, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := logs.FirstIndex(); first != 0 {
		t.Fatalf("empty log: first index %d", first)
	}
	var batch []*raft.Log
	for i := uint64(1); i <= 100; i++ {
		batch = append(batch, &raft.Log{Index: i, Term: 1 + i/50, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, int(i))})
	}
	if err := logs.StoreLogs(batch[:60]); err != nil {
		t.Fatal(err)
	}
	if err := logs.StoreLog(batch[60]); err != nil {
		t.Fatal(err)
	}
	if err := logs.StoreLogs(batch[61:]); err != nil {
		t.Fatal(err)
	}
	if err := logs.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	if err := stable.Set([]byte("CurrentTerm-bytes"), []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := stable.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	check := func(logs raft.LogStore, stable raft.StableStore) {
		t.Helper()
		first, _ := logs.FirstIndex()
		last, _ := logs.LastIndex()
		if first != 11 || last != 100 {
			t.Fatalf("indexes [%d, %d], want [11, 100]", first, last)
		}
		// (Below FirstIndex nothing is read: raft-wal drops a deleted head
		// only with its whole segment.)
		var l raft.Log
		for i := uint64(11); i <= 100; i++ {
			if err := logs.GetLog(i, &l); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
			if l.Index != i || l.Term != 1+i/50 || !bytes.Equal(l.Data, bytes.Repeat([]byte{byte(i)}, int(i))) {
				t.Fatalf("entry %d came back as %+v", i, l)
			}
		}
		if v, err := stable.Get([]byte("CurrentTerm-bytes")); err != nil || string(v) != "abc" {
			t.Fatalf("stable Get = %q, %v", v, err)
		}
		if v, err := stable.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
			t.Fatalf("stable GetUint64 = %d, %v", v, err)
		}
	}
	check(logs, stable)
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	logs, stable, closer, err = open()
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	check(logs, stable)
}

func TestWALStores(t *testing.T) {
	dir := t.TempDir()
	exerciseStores(t, func() (raft.LogStore, raft.StableStore, io.Closer, error) {
		return openStores(dir, quietLog())
	})
	if _, err := os.Stat(filepath.Join(dir, walDir)); err != nil {
		t.Fatalf("a new node directory should get raft-wal: %v", err)
	}
}

// TestPebbleStoresKeptForOldDirectories: a node directory that already
// holds the Pebble store keeps using it (its log is the node's Raft state).
func TestPebbleStoresKeptForOldDirectories(t *testing.T) {
	dir := t.TempDir()
	logs, _, closer, err := openPebbleStores(filepath.Join(dir, pebbleDir), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if err := logs.StoreLog(&raft.Log{Index: 1, Term: 1, Data: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	closer.Close()
	logs, _, closer, err = openStores(dir, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	var l raft.Log
	if err := logs.GetLog(1, &l); err != nil || string(l.Data) != "old" {
		t.Fatalf("the old Pebble log was not used: %+v, %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(dir, walDir)); err == nil {
		t.Fatal("raft-wal was opened beside the Pebble store")
	}
	other := filepath.Join(t.TempDir(), pebbleDir)
	exerciseStores(t, func() (raft.LogStore, raft.StableStore, io.Closer, error) {
		return openPebbleStores(other, quietLog())
	})
}

// The log with syncs on a timer keeps the store contract, reopened too.
func TestWALStoresSyncingOnATimer(t *testing.T) {
	dir := t.TempDir()
	exerciseStores(t, func() (raft.LogStore, raft.StableStore, io.Closer, error) {
		return storesSyncing(20*time.Millisecond)(dir, quietLog())
	})
}
