package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/slot"
)

// faultGrow grows a sharded cluster by a group and shrinks it again under
// the traffic: a one-member group joins (--cluster-join, CLUSTER
// ADDGROUP), takes 256 slots (CLUSTER MIGRATESLOTS, its configuration
// following), serves them a while, gives them back, and is removed
// (CLUSTER REMOVEGROUP) and stopped. Each time a new group id: ids are
// never used again.
const faultGrow fault = "add a group, move slots to it and back, remove it"

// robustGrow is faultGrow. It gives up (and says so in the timeline) on
// a step that does not succeed within its bound; the slots it moved stay
// where they are (the group stays, and serves them to the end).
func robustGrow(t *testing.T, rng *rand.Rand, rc *robustCluster, rec *robustRecorder) {
	rc.grown++
	id := fmt.Sprintf("g%d", len(rc.groups)+rc.grown)
	member := id + "n1"
	s := &Server{t: t, Addr: freeAddr(t), DataDir: t.TempDir()}
	raft := freeAddr(t)
	s.Args = []string{"--enable-debug-command", "--data-dir", s.DataDir, "--node-id", member,
		"--cluster-join", rc.nodes[rng.IntN(len(rc.nodes))].Addr, "--cluster-secret-file", rc.secret}
	if len(rc.traces) > 0 {
		// Its applies are traced too (the report's apply-*.txt).
		trace := filepath.Join(t.TempDir(), "apply-trace")
		rc.traces = append(rc.traces, trace)
		s.Args = append(s.Args, "--failpoints", "apply-trace=append-to-"+trace)
	}
	t.Cleanup(s.Kill)
	rec.note("%s: %s (%s)", faultGrow, id, s.Addr)
	asLeader := func(what string, args ...any) bool {
		var err error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			l := rc.leader(t, rng.IntN(len(rc.groups)))
			if l == nil {
				continue
			}
			err = robustDo(l, args...).Err()
			if err == nil {
				return true
			}
		}
		rec.note("%s %s: %v; given up", what, id, err)
		return false
	}
	if !asLeader("ADDGROUP", "CLUSTER", "ADDGROUP", id, member, s.Addr, raft) {
		return
	}
	robustStart(s, rec)
	// Its group leads itself and holds the map once it answers MYID.
	var node string
	for deadline := time.Now().Add(30 * time.Second); node == "" && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if role(t, s) == "master" {
			node, _ = robustNodeID(s)
		}
	}
	if node == "" {
		rec.note("%s: %s never led; given up", faultGrow, id)
		return
	}
	lo := rng.IntN(64) * 256
	from, ok := robustMoveTo(t, rc, rec, lo, node)
	if !ok {
		return
	}
	select {
	case <-time.After(time.Duration(1000+rng.IntN(3000)) * time.Millisecond):
	case <-t.Context().Done():
	}
	back, err := robustNodeID(from)
	if err != nil {
		rec.note("%s: CLUSTER MYID of %s: %v; %s keeps %d-%d", faultGrow, from.Addr, err, id, lo, lo+255)
		return
	}
	if _, ok := robustMoveTo(t, &robustCluster{t: t, groups: [][]*Server{{s}}, nodes: []*Server{s}}, rec, lo, back); !ok {
		return
	}
	if !asLeader("REMOVEGROUP", "CLUSTER", "REMOVEGROUP", id) {
		return
	}
	robustStop(s, rec)
	rec.note("healed %s: removed", id)
}

// robustNodeID is CLUSTER MYID at s.
func robustNodeID(s *Server) (string, error) { return robustDo(s, "CLUSTER", "MYID").Text() }

// robustDo sends one command to s on a connection of its own, closed once
// answered (the nemesis' calls, thousands in a long run, keep none open).
func robustDo(s *Server, args ...any) *redis.Cmd {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, MaxRetries: -1, ReadTimeout: 10 * time.Second})
	defer c.Close()
	return c.Do(context.Background(), args...)
}

// robustMoveTo moves slots lo to lo+255 from whichever of rc's groups owns
// them to node (a CLUSTER MYID), through the owner's leader, and waits for
// the move to end; it answers the owner's leader it moved them from.
func robustMoveTo(t *testing.T, rc *robustCluster, rec *robustRecorder, lo int, node string) (*Server, bool) {
	tag := slot.Tag(lo)
	key := "{" + string(tag[:]) + "}"
	var leader *Server
	src := -1
	for deadline := time.Now().Add(30 * time.Second); src < 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		for g := range rc.groups {
			l := rc.leader(t, g)
			if l == nil {
				continue
			}
			err := robustDo(l, "CL.THROTTLE", key, 1, 1, 1, 0).Err()
			if err == nil {
				err = robustDo(l, "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", lo, lo+255, "NODE", node).Err()
				if err == nil {
					src, leader = g, l
				} else if !strings.Contains(err.Error(), "no leader known") {
					rec.note("MIGRATESLOTS %d-%d to %s refused (%v)", lo, lo+255, node, err)
				}
			}
		}
	}
	if src < 0 {
		rec.note("moving %d-%d to %s: no owner took it; given up", lo, lo+255, node)
		return nil, false
	}
	rec.note("moving %d-%d from %s to %s", lo, lo+255, leader.Addr, node)
	return robustAwaitMove(t, rc, rec, src, lo, node)
}

// robustAwaitMove waits up to a minute for the move of lo to lo+255 out of
// group src (of rc) to end, and answers the group's leader then and
// whether the move succeeded; the timeline says how it ended.
func robustAwaitMove(t *testing.T, rc *robustCluster, rec *robustRecorder, src, lo int, to string) (*Server, bool) {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		l := rc.leader(t, src)
		if l == nil {
			continue
		}
		ms := robustMigrations(redis.NewClient(&redis.Options{Addr: l.Addr, Protocol: 2, MaxRetries: -1}))
		running := false
		for _, m := range ms {
			running = running || m["state"] == "running"
		}
		if !running && len(ms) > 0 {
			rec.note("moved %d-%d to %s (%v)", lo, lo+255, to, ms[0]["state"])
			return l, ms[0]["state"] == "success"
		}
	}
	rec.note("the move of %d-%d to %s had not ended in 60 s; given up", lo, lo+255, to)
	return nil, false
}
