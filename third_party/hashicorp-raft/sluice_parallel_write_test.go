// Copyright IBM Corp. 2013, 2025
// SPDX-License-Identifier: MPL-2.0

package raft

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// sluice patch 2 (PATCHES.md): Config.LeaderParallelWrite.

// gatedStore holds a StoreLogs until its gate opens, or fails it.
type gatedStore struct {
	*InmemStore
	mu      sync.Mutex
	gate    chan struct{}
	entered chan struct{}
	fail    error
}

func (s *gatedStore) StoreLogs(logs []*Log) error {
	s.mu.Lock()
	gate, entered, fail := s.gate, s.entered, s.fail
	s.mu.Unlock()
	if gate != nil {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-gate
	}
	if fail != nil {
		return fail
	}
	return s.InmemStore.StoreLogs(logs)
}

func (s *gatedStore) StoreLog(l *Log) error { return s.StoreLogs([]*Log{l}) }

// hold makes the next StoreLogs wait until the returned func is called.
func (s *gatedStore) hold() (entered <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gate, in := make(chan struct{}), make(chan struct{}, 1)
	s.gate, s.entered = gate, in
	var once sync.Once
	return in, func() {
		once.Do(func() {
			s.mu.Lock()
			s.gate = nil
			s.mu.Unlock()
			close(gate)
		})
	}
}

type parallelCluster struct {
	rafts  []*Raft
	stores []*gatedStore
	trans  []*InmemTransport
	fsms   []*MockFSM
}

// makeParallelCluster starts three voters with LeaderParallelWrite and
// returns them once one leads.
func makeParallelCluster(t *testing.T) (*parallelCluster, *Raft) {
	t.Helper()
	c := &parallelCluster{}
	var servers []Server
	for i := 0; i < 3; i++ {
		addr, tr := NewInmemTransport("")
		c.trans = append(c.trans, tr)
		servers = append(servers, Server{Suffrage: Voter, ID: ServerID(fmt.Sprint("s", i)), Address: addr})
	}
	for i, a := range c.trans {
		for j, b := range c.trans {
			if i != j {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	for i := 0; i < 3; i++ {
		conf := inmemConfig(t)
		conf.LocalID = servers[i].ID
		conf.LeaderParallelWrite = true
		// Replicators send when told of new entries, not on a timer: the
		// first test sees that they are told before the write.
		conf.CommitTimeout = time.Minute
		store := &gatedStore{InmemStore: NewInmemStore()}
		fsm := &MockFSM{}
		snaps := NewInmemSnapshotStore()
		if err := BootstrapCluster(conf, store, store, snaps, c.trans[i], Configuration{Servers: servers}); err != nil {
			t.Fatal(err)
		}
		r, err := NewRaft(conf, fsm, store, store, snaps, c.trans[i])
		if err != nil {
			t.Fatal(err)
		}
		c.rafts, c.stores, c.fsms = append(c.rafts, r), append(c.stores, store), append(c.fsms, fsm)
	}
	t.Cleanup(func() {
		for _, r := range c.rafts {
			r.Shutdown().Error()
		}
	})
	return c, c.leader(t, nil)
}

// leader waits for a leader other than not.
func (c *parallelCluster) leader(t *testing.T, not *Raft) *Raft {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range c.rafts {
			if r != not && r.State() == Leader {
				return r
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no leader")
	return nil
}

func (c *parallelCluster) index(r *Raft) int {
	for i, x := range c.rafts {
		if x == r {
			return i
		}
	}
	return -1
}

// A leader's followers are sent an entry while the leader's own write of
// it is still running, and the leader does not count itself toward the
// entry's commit until that write returns: with one follower holding it
// and the other cut off, the entry does not commit until the leader's
// write is done.
func TestLeaderSendsEntriesWhileWritingThem(t *testing.T) {
	c, leader := makeParallelCluster(t)
	li := c.index(leader)
	a, b := (li+1)%3, (li+2)%3
	idA := c.rafts[a].localID
	c.trans[li].Disconnect(c.trans[b].LocalAddr())
	entered, release := c.stores[li].hold()
	defer release() // a failing test must not leave the leader stuck in its write
	fut := leader.Apply([]byte("x"), 5*time.Second)
	<-entered
	index := leader.getLastIndex()
	// Follower a stores it and its answer reaches the leader, all while
	// the leader's write waits.
	deadline := time.Now().Add(10 * time.Second)
	for {
		cm := leader.leaderState.commitment
		cm.Lock()
		matched := cm.matchIndexes[idA]
		self := cm.matchIndexes[leader.localID]
		commit := cm.commitIndex
		cm.Unlock()
		if matched >= index {
			if self >= index || commit >= index {
				t.Fatalf("the leader counted its own write before it returned: its match %d, commit %d, entry %d", self, commit, index)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower %d was not sent entry %d while the leader wrote it (matched %d)", a, index, matched)
		}
		time.Sleep(time.Millisecond)
	}
	release()
	if err := fut.Error(); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if got := leader.getCommitIndex(); got < index {
		t.Fatalf("commit index %d after the write, want >= %d", got, index)
	}
}

// A leader whose write fails steps down, its log ending where its store's
// does; the group carries on and every member applies the same entries.
func TestLeaderWhoseWriteFailsStepsDown(t *testing.T) {
	c, leader := makeParallelCluster(t)
	li := c.index(leader)
	if err := leader.Apply([]byte("before"), 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	c.stores[li].mu.Lock()
	c.stores[li].fail = errors.New("disk gone")
	c.stores[li].mu.Unlock()
	if err := leader.Apply([]byte("lost?"), 5*time.Second).Error(); err == nil {
		t.Fatal("an apply whose leader's write failed succeeded")
	}
	stored, _ := c.stores[li].LastIndex()
	if last := leader.getLastIndex(); last != stored {
		t.Fatalf("after its failed write the old leader's last index is %d, its store's %d", last, stored)
	}
	c.stores[li].mu.Lock()
	c.stores[li].fail = nil
	c.stores[li].mu.Unlock()
	next := c.leader(t, nil)
	var err error
	for range 100 {
		if err = next.Apply([]byte("after"), 5*time.Second).Error(); err == nil {
			break
		}
		next = c.leader(t, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	// Every member applies the same entries (the failed one or not, but
	// all alike).
	want := func() string { return fmt.Sprintf("%q", c.fsms[c.index(next)].Logs()) }()
	deadline := time.Now().Add(10 * time.Second)
	for i := range c.fsms {
		for {
			got := fmt.Sprintf("%q", c.fsms[i].Logs())
			if got == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %d applied %s, the leader %s", i, got, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
