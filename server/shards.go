package server

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/member"
	"github.com/sluice-rl/sluice/shardmap"
)

// A sharded server is a member of one group of a cluster map
// (--cluster-map): its group is its Raft cluster, the map says which slots
// the group owns, and the surface sends clients asking about other slots
// to the group that owns them (commands.Replicated.Shards). Two loops keep
// it so: the group's leader logs the slots it owns (SLUICE.OWN, the fence
// every apply checks) before it serves keyed commands, and every member
// learns the other groups' leaders, so a redirect names a leader.

// shardedRouter builds the router of a sharded member (nil: not sharded).
func (s *Server) shardedRouter() (*shardmap.Router, error) {
	rep := s.cfg.Replication
	if rep.Map == nil {
		return nil, nil
	}
	g, _, _ := rep.Map.Member(rep.NodeID)
	r, err := shardmap.NewRouter(rep.Map, g.ID)
	if err != nil {
		return nil, err
	}
	r.SetOwnLog(s.env.Machine.OwnsSlot)
	return r, nil
}

// fenced reports whether this group's state machine fences by the map's
// epoch (or a later one).
func (s *Server) fenced() bool {
	o := s.env.Machine.Owned()
	return o != nil && o.Epoch >= s.cfg.Replication.Map.Epoch
}

// syncOwnership, on a serving leader whose group is not yet fenced by the
// map, logs the slots it owns.
func (s *Server) syncOwnership() {
	if s.router == nil {
		return
	}
	if o := s.env.Machine.Owned(); o != nil {
		// The group's log, not the file, says what it owns now.
		s.router.Claim(s.router.Self(), o.Epoch, o.Ranges)
		if o.Epoch > s.cfg.Replication.Map.Epoch && !s.staleMap {
			// Slots moved since the file was written (or it is an older
			// file): the file only started the cluster. Say so, once.
			s.staleMap = true
			s.log.Info("this member's --cluster-map is older than its group's: it routes by the slots each group's log claims",
				"map_epoch", s.cfg.Replication.Map.Epoch, "group_epoch", o.Epoch)
		}
	}
	if !s.node.Serving() || s.fenced() {
		return
	}
	args := [][]byte{[]byte("SLUICE.OWN"), strconv.AppendUint(nil, s.cfg.Replication.Map.Epoch, 10)}
	for _, r := range s.router.OwnedRanges() {
		args = append(args, []byte(r))
	}
	get, err := commands.Replicated{Node: s.node}.ApplyAll([][][]byte{args})
	if err != nil {
		s.log.Warn("the group's slots are not logged yet", "err", err)
		return
	}
	if reply, _ := get(0); string(reply) != "+OK\r\n" {
		s.log.Error("the group's slots were refused", "reply", string(reply))
	}
}

// shardLoop keeps the fence logged and the other groups' leaders known.
func (s *Server) shardLoop() {
	defer s.bg.Done()
	tick := time.NewTicker(shardmap.ProbeEvery)
	defer tick.Stop()
	for {
		s.syncOwnership()
		s.moves.SyncGroups() // groups added or removed while running
		s.probeLeaders()
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}

// probeLeaders asks every member of the other groups, on its member port,
// what it knows of its group (member.Report), and records each group's
// leader, slots, migrations and lag.
func (s *Server) probeLeaders() {
	m := s.router.Map()
	var wg sync.WaitGroup
	leaders := make([]string, len(m.Groups))
	answered := make([][]string, len(m.Groups))
	var mu sync.Mutex
	for g := range m.Groups {
		if g == s.router.Self() || m.Groups[g].Removed {
			continue
		}
		for _, p := range m.Groups[g].Members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				rep, err := s.memberClient.Report(ctx, member.Addr{Port: s.memberPort(p), Group: m.Groups[g].ID})
				if err != nil {
					return
				}
				mu.Lock()
				answered[g] = append(answered[g], p.ClientAddr)
				mu.Unlock()
				// Any member's report of its group's slots is a claim its
				// log made; the router keeps the latest.
				if rep.Fenced {
					s.router.Claim(g, rep.Slots.Epoch, rep.Slots.Ranges)
				}
				if !rep.Leader {
					return
				}
				if rep.Fenced {
					s.router.SetJobViews(g, rep.Slots.Jobs)
				}
				mu.Lock()
				leaders[g] = p.ClientAddr
				mu.Unlock()
				// The leader's log time against this member's wall clock:
				// the group's lag.
				s.router.SetLag(g, time.Now().UnixNano()-rep.LogTime)
			}()
		}
	}
	wg.Wait()
	for g, addr := range leaders {
		if g != s.router.Self() {
			s.router.SetLeader(g, addr)
			slices.Sort(answered[g])
			s.router.SetAnswered(g, answered[g])
		}
	}
}
