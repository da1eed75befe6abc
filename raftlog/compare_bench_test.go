package raftlog

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
)

// BenchmarkStoreLogsCompare appends batches of 1 KB entries, synced, on the
// real disk, to this store, raft-wal and raft-boltdb/v2.
func BenchmarkStoreLogsCompare(b *testing.B) {
	type store interface {
		raft.LogStore
		Close() error
	}
	opens := []struct {
		name string
		open func(dir string) (store, error)
	}{
		{"pebble", func(dir string) (store, error) { return Open(DefaultOptions(dir)) }},
		{"raft-wal", func(dir string) (store, error) { return raftwal.Open(dir) }},
		{"raft-boltdb", func(dir string) (store, error) { return raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db")) }},
	}
	for _, batch := range []int{1, 64} {
		for _, o := range opens {
			b.Run(fmt.Sprintf("%s/batch=%d", o.name, batch), func(b *testing.B) {
				s, err := o.open(b.TempDir())
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
				b.ResetTimer()
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
}
