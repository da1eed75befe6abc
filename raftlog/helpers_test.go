package raftlog

import (
	"bytes"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// openMem opens a store in dir on fs (a MemFS the test keeps, so it can
// reopen or crash it) and closes it when the test ends.
func openMem(t testing.TB, fs vfs.FS, dir string) *Store {
	t.Helper()
	o := DefaultOptions(dir)
	o.FS = fs
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// entry returns a log entry at index whose fields all depend on it, so a
// read of the wrong entry or a lost field shows.
func entry(index uint64) *raft.Log {
	l := &raft.Log{
		Index:      index,
		Term:       index/3 + 1,
		Type:       raft.LogType(index % 6),
		Data:       bytes.Repeat([]byte{byte(index)}, int(index%5)*7),
		AppendedAt: time.Unix(1_700_000_000+int64(index), int64(index*1000+1)).UTC(),
	}
	if index%2 == 0 {
		l.Extensions = []byte{'x', byte(index)}
	}
	return l
}

// entries returns entry(i) for i in [lo, hi].
func entries(lo, hi uint64) []*raft.Log {
	var ls []*raft.Log
	for i := lo; i <= hi; i++ {
		ls = append(ls, entry(i))
	}
	return ls
}

// sameLog reports whether two entries hold the same fields (times compared
// as instants).
func sameLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Extensions, b.Extensions) &&
		a.AppendedAt.Equal(b.AppendedAt)
}

// wantBounds checks FirstIndex and LastIndex.
func wantBounds(t *testing.T, s *Store, first, last uint64) {
	t.Helper()
	f, err := s.FirstIndex()
	if err != nil {
		t.Fatalf("FirstIndex: %v", err)
	}
	l, err := s.LastIndex()
	if err != nil {
		t.Fatalf("LastIndex: %v", err)
	}
	if f != first || l != last {
		t.Fatalf("bounds = [%d, %d], want [%d, %d]", f, l, first, last)
	}
}

// wantEntries checks that exactly the indexes in [lo, hi] among [0, top]
// are stored, each holding entry(i).
func wantEntries(t *testing.T, s *Store, lo, hi, top uint64) {
	t.Helper()
	for i := uint64(0); i <= top; i++ {
		var got raft.Log
		err := s.GetLog(i, &got)
		if i < lo || i > hi {
			if err != raft.ErrLogNotFound { // raft compares with ==
				t.Fatalf("GetLog(%d) = %v, %+v; want raft.ErrLogNotFound", i, err, got)
			}
			continue
		}
		if err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if want := entry(i); !sameLog(&got, want) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", i, got, *want)
		}
	}
}
