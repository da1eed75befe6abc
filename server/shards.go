package server

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/crossgroup"
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
	clients := map[string]*redis.Client{}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	tick := time.NewTicker(shardmap.ProbeEvery)
	defer tick.Stop()
	for {
		s.syncOwnership()
		s.moves.SyncGroups() // groups added or removed while running
		s.probeLeaders(clients)
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}

// probeLeaders asks every member of the other groups for its role, and
// records each group's leader.
func (s *Server) probeLeaders(clients map[string]*redis.Client) {
	m := s.router.Map()
	var wg sync.WaitGroup
	leaders := make([]string, len(m.Groups))
	var mu sync.Mutex
	for g := range m.Groups {
		if g == s.router.Self() || m.Groups[g].Removed {
			continue
		}
		for _, p := range m.Groups[g].Members {
			c := clients[p.ClientAddr]
			if c == nil {
				c = redis.NewClient(&redis.Options{Addr: p.ClientAddr, Password: s.cfg.RequirePass, MaxRetries: -1,
					TLSConfig:   crossgroup.ForAddr(s.memberTLS, p.ClientAddr),
					DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
					PoolSize: 1, DisableIdentity: true, Protocol: 2})
				clients[p.ClientAddr] = c
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				// ROLE says who leads; the leader's INFO cluster its log
				// time: against this member's wall clock, the group's lag.
				var role *redis.Cmd
				var info *redis.StringCmd
				defer func() {
					// Any member's report of its group's slots is a claim
					// its log made; the router keeps the latest.
					if info == nil || info.Err() != nil {
						return
					}
					rep, ok := shardmap.ParseReport(info.Val())
					if ok {
						s.router.Claim(g, rep.Epoch, rep.Ranges)
					}
					if v, err := role.Slice(); err == nil && len(v) > 0 && v[0] == "master" {
						s.router.SetJobViews(g, rep.Jobs)
					}
				}()
				c.Pipelined(ctx, func(p redis.Pipeliner) error {
					role = p.Do(ctx, "ROLE")
					info = p.Info(ctx, "cluster")
					return nil
				})
				v, err := role.Slice()
				if err != nil || len(v) == 0 || v[0] != "master" {
					return
				}
				mu.Lock()
				leaders[g] = p.ClientAddr
				mu.Unlock()
				if ms, ok := infoField(info.Val(), "sluice_log_time_ms"); ok {
					s.router.SetLag(g, time.Now().UnixNano()-ms*1e6)
				}
			}()
		}
	}
	wg.Wait()
	for g, addr := range leaders {
		if g != s.router.Self() {
			s.router.SetLeader(g, addr)
		}
	}
}

// infoField reads an integer field of an INFO reply.
func infoField(info, name string) (int64, bool) {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
