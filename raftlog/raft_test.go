package raftlog

import (
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// countFSM records the commands it applied.
type countFSM struct {
	mu   sync.Mutex
	cmds []string
}

func (f *countFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, string(l.Data))
	return nil
}

func (f *countFSM) applied() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cmds...)
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, raft.ErrNothingNewToSnapshot }
func (f *countFSM) Restore(io.ReadCloser) error         { return nil }

// startRaft runs a one-node raft on s and waits until it leads.
func startRaft(t *testing.T, s *Store, fsm raft.FSM, bootstrap bool) *raft.Raft {
	t.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = "n1"
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	addr, trans := raft.NewInmemTransport("n1")
	if bootstrap {
		err := raft.BootstrapCluster(conf, s, s, raft.NewInmemSnapshotStore(), trans,
			raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: addr}}})
		if err != nil {
			t.Fatalf("BootstrapCluster: %v", err)
		}
	}
	r, err := raft.NewRaft(conf, fsm, s, s, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatalf("NewRaft: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.State() != raft.Leader {
		if time.Now().After(deadline) {
			_ = r.Shutdown().Error()
			t.Fatal("no leader within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return r
}

// TestRaftRunsOnTheStore runs hashicorp/raft on the store, restarts it on
// the reopened files, and checks that the log replays into a new FSM.
func TestRaftRunsOnTheStore(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, "raft")
	fsm := &countFSM{}
	r := startRaft(t, s, fsm, true)
	var want []string
	for _, c := range []string{"a", "b", "c", "d"} {
		if err := r.Apply([]byte(c), time.Second).Error(); err != nil {
			t.Fatalf("Apply(%s): %v", c, err)
		}
		want = append(want, c)
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if got := fsm.applied(); len(got) != len(want) {
		t.Fatalf("applied %q, want %q", got, want)
	}
	term, err := s.GetUint64([]byte("CurrentTerm"))
	if err != nil || term == 0 {
		t.Fatalf("CurrentTerm = %d, %v; want a term", term, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openMem(t, fs, "raft")
	fsm = &countFSM{}
	r = startRaft(t, s, fsm, false)
	defer r.Shutdown()
	if err := r.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatalf("Barrier: %v", err)
	}
	got := fsm.applied()
	if len(got) != len(want) {
		t.Fatalf("replayed %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("replayed %q, want %q", got, want)
		}
	}
	if t2, _ := s.GetUint64([]byte("CurrentTerm")); t2 <= term {
		t.Fatalf("term after restart = %d, want above %d", t2, term)
	}
}
