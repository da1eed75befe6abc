package server

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// servesSlots reports whether keyed commands may be decided here: the
// group fences by the map, and the other groups' claims were heard
// (claimsHeard), so a slot another group claims at the same epoch is
// known before this group decides for it.
func (s *Server) servesSlots() bool { return s.fenced() && s.claims.heard.Load() }

// claimsHeard is what the probes have shown of the other groups' claims.
type claimsHeard struct {
	// heard is set once every other group answered a probe, or
	// heardWithin passed without some of them (a group that does not
	// answer cannot decide either; its claim is checked when it does).
	heard  atomic.Bool
	rounds int
	// said is the conflicts last logged ("" none).
	said string
}

// heardWithin is how many probe rounds a member waits for every other
// group to answer before it decides without having heard some.
const heardWithin = 8

// noteProbe records a probe round (answered: the members of each group
// that answered) and says a new or ended conflict.
func (s *Server) noteProbe(answered [][]string) {
	c := &s.claims
	if !c.heard.Load() {
		c.rounds++
		var silent []string
		m := s.router.Map()
		for g := range m.Groups {
			if g != s.router.Self() && !m.Groups[g].Removed && len(answered[g]) == 0 {
				silent = append(silent, m.Groups[g].ID)
			}
		}
		switch {
		case len(silent) == 0:
			c.heard.Store(true)
		case c.rounds >= heardWithin:
			s.log.Warn("deciding before every group answered: a claim of this group's slots they make is noticed when they answer",
				"silent_groups", strings.Join(silent, ","))
			c.heard.Store(true)
		}
	}
	var said []string
	for _, cf := range s.router.Conflicts() {
		said = append(said, s.router.Describe(cf))
	}
	now := strings.Join(said, "; ")
	switch {
	case now == c.said:
	case now != "":
		s.log.Error("two groups claim the same slots at one epoch: no group decides for them (CLUSTERDOWN) until one is given them at a later epoch; "+
			"a member was started with a map that splits the slots otherwise at the same epoch", "conflicts", now)
	default:
		s.log.Info("no slot is claimed by two groups any more", "were", c.said)
	}
	c.said = now
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
	s.noteProbe(answered)
	for g, addr := range leaders {
		if g != s.router.Self() {
			s.router.SetLeader(g, addr)
			slices.Sort(answered[g])
			s.router.SetAnswered(g, answered[g])
		}
	}
}
