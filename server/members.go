package server

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/member"
	"github.com/sluice-rl/sluice/raftmux"
	"github.com/sluice-rl/sluice/rls"
)

// A replicated member's member port is its Raft address: one listener
// (package raftmux) carries its group's Raft and the calls other members
// make of it (package member), each connection naming its purpose and,
// with --cluster-secret-file, proving membership before it is heard. A
// process hosting several members shares one such port (cmd/sluice).

// peersGroup names the group of a --peers cluster (no cluster map) on
// its member port: every member of it uses the same.
const peersGroup = "sluice"

// groupID is the id of this member's group on the member port.
func (r Replication) groupID() string {
	if r.Map != nil {
		if g, _, ok := r.Map.Member(r.NodeID); ok {
			return g.ID
		}
	}
	return peersGroup
}

// openMemberPort listens on this member's Raft address for its Raft and
// member calls, unless the process gave it a layer of a port it shares.
func (s *Server) openMemberPort(cc *cluster.Config) error {
	r := s.cfg.Replication
	if cc.StreamLayer != nil || cc.Transport != nil {
		s.memberLn = r.Members
		return nil
	}
	var self string
	for _, p := range r.Peers {
		if p.ID == r.NodeID {
			self = p.RaftAddr
		}
	}
	listen := self
	var advertise net.Addr
	if r.ListenAddr != "" {
		// The map's name is announced as written: it may resolve only
		// once this member is reachable (a pod's DNS record).
		listen, advertise = r.ListenAddr, raftmux.NamedAddr(self)
	} else {
		tcp, err := net.ResolveTCPAddr("tcp", self)
		if err != nil {
			return fmt.Errorf("server: raft address %s: %w", self, err)
		}
		advertise = tcp
	}
	mux, err := raftmux.ListenAs(listen, advertise, s.guard, s.log)
	if err != nil {
		return fmt.Errorf("server: listen on the member port %s: %w", listen, err)
	}
	layer, err := mux.Layer(r.groupID())
	if err == nil {
		s.memberLn, err = mux.Members(r.groupID())
	}
	if err != nil {
		mux.Close()
		return err
	}
	s.mux, cc.StreamLayer = mux, layer
	s.env.Transport = mux.RaftBufferBytes
	s.env.MemberPort = mux
	return nil
}

// serveMembers answers other members' calls on the member port.
func (s *Server) serveMembers() error {
	if s.memberLn == nil {
		return nil
	}
	rep := commands.Replicated{Node: s.node}
	// Calls followers forward are decided here as the leader's own doors
	// decide theirs, through the same sessions and log batches.
	forwarded := rls.NewNodeDecider(s.env, s.node, rls.ForwardOptions{}, nil)
	var err error
	s.members, err = member.Serve(s.memberLn, member.ServerConfig{Group: s.cfg.Replication.groupID(), Apply: s.applyForMember, Log: s.log,
		Place: func(_ context.Context, req *machine.PlacementRequest) (machine.PlacementResult, string, error) {
			return rep.Place(req)
		},
		Decide: forwarded.DecideAllHere,
		Report: func() member.Report { return rep.Report(time.Now()) },
		Part: func(_ context.Context, req *machine.PartRequest) (machine.PartResult, string, error) {
			return rep.Part(req)
		}})
	return err
}

// closeMemberPort stops the member calls and, after the node closed its
// Raft layer, the port.
func (s *Server) closeMemberPort() {
	if s.members != nil {
		s.members.Stop()
	}
	if s.mux != nil {
		s.mux.Close()
	}
}

// applyForMember applies a command a member of 0.4.0 sent through this
// group's log (commands.Replicated.ApplyForMember).
func (s *Server) applyForMember(_ context.Context, args [][]byte) ([]byte, string, error) {
	return commands.Replicated{Node: s.node}.ApplyForMember(args)
}

// memberAt is where the member whose client address is addr takes member
// calls: its Raft address (or the one --raft-dial-via gives) and group.
func (s *Server) memberAt(addr string) (member.Addr, bool) {
	m := s.cfg.Replication.Map
	if s.router != nil {
		m = s.router.Map()
	}
	if m == nil {
		// A --peers cluster: one group, its members the peers.
		for _, p := range s.cfg.Replication.Peers {
			if p.ClientAddr == addr {
				return member.Addr{Port: s.memberPort(p), Group: peersGroup}, true
			}
		}
		return member.Addr{}, false
	}
	for _, g := range m.Groups {
		for _, p := range g.Members {
			if p.ClientAddr != addr {
				continue
			}
			return member.Addr{Port: s.memberPort(p), Group: g.ID}, true
		}
	}
	return member.Addr{}, false
}

// memberPort is where member p takes member calls: its Raft address, or
// the one --raft-dial-via gives.
func (s *Server) memberPort(p cluster.Peer) string {
	if via, ok := s.cfg.Replication.DialVia[p.ID]; ok {
		return via
	}
	return p.RaftAddr
}

// groupReport asks group g's leader what it knows of its group; this
// member's own group's is its own log's.
func (s *Server) groupReport(ctx context.Context, g int) (member.Report, error) {
	if g == s.router.Self() {
		return commands.Replicated{Node: s.node}.Report(time.Now()), nil
	}
	addr, ok := s.router.Leader(g)
	if !ok {
		return member.Report{}, fmt.Errorf("%w: group %s has no leader known", member.ErrUnreachable, s.router.Map().Groups[g].ID)
	}
	to, ok := s.memberAt(addr)
	if !ok {
		return member.Report{}, fmt.Errorf("%w: no member has the client address %s", member.ErrUnreachable, addr)
	}
	return s.memberClient.Report(ctx, to)
}
