package raftlog

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkStoreLogs appends batches of 1 KB entries, synced, on the real
// disk. The comparison with raft-wal v0.4.0 and raft-boltdb/v2 v2.3.0 that
// chose this store lived in commit b4888ff (compare_bench_test.go); their
// dependencies were dropped afterwards.
func BenchmarkStoreLogs(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, err := Open(DefaultOptions(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			logs := make([]*raft.Log, batch)
			data := make([]byte, 1024)
			for i := range logs {
				logs[i] = &raft.Log{Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
			}
			next := uint64(1)
			b.SetBytes(int64(batch * len(data)))
			b.ReportAllocs()
			for b.Loop() {
				for _, l := range logs {
					l.Index = next
					next++
				}
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGetLog reads back 1 KB entries (raft reads each one to replicate
// it to followers and to apply it).
func BenchmarkGetLog(b *testing.B) {
	s, err := Open(DefaultOptions(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 1024
	logs := make([]*raft.Log, n)
	for i := range logs {
		logs[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Data: make([]byte, 1024)}
	}
	if err := s.StoreLogs(logs); err != nil {
		b.Fatal(err)
	}
	var l raft.Log
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		if err := s.GetLog(i%n+1, &l); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
