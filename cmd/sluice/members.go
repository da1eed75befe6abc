package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/memberauth"
	"github.com/sluice-rl/sluice/raftmux"
	"github.com/sluice-rl/sluice/server"
	"github.com/sluice-rl/sluice/shardmap"
)

// resolve reads into the config what the flags name: the members of a
// replicated or sharded cluster, the password and secret files. hosted
// are the members of a cluster map this process hosts when it was given
// several --node-id (nil: one).
func (o *options) resolve() ([]string, error) {
	cfg := &o.cfg
	rep := &cfg.Replication
	if o.peers != "" && o.clusterMap != "" {
		return nil, errors.New("give --peers or --cluster-map, not both")
	}
	if o.clusterJoin != "" && (o.peers != "" || o.clusterMap != "") {
		return nil, errors.New("give --cluster-join alone: the cluster it joins gives the map")
	}
	if o.clusterJoin != "" && rep.NodeID == "" {
		return nil, errors.New("--cluster-join needs --node-id: the member id CLUSTER ADDGROUP will name")
	}
	if o.peers != "" {
		list, err := cluster.ParsePeers(o.peers)
		if err != nil {
			return nil, err
		}
		rep.Peers = list
	}
	var hosted []string // several members of one map in this process
	if o.clusterMap != "" {
		m, err := shardmap.Load(o.clusterMap)
		if err != nil {
			return nil, err
		}
		ids := strings.Split(rep.NodeID, ",")
		for _, id := range ids {
			if _, _, ok := m.Member(id); !ok {
				return nil, fmt.Errorf("--node-id %q is not a member of the cluster map %s", id, o.clusterMap)
			}
		}
		if len(ids) > 1 {
			hosted = ids
			rep.Map = m
		} else {
			g, _, _ := m.Member(rep.NodeID)
			rep.Peers, rep.Map = g.Members, m
		}
	}
	if o.dialVia != "" {
		rep.DialVia = map[string]string{}
		for _, kv := range strings.Split(o.dialVia, ",") {
			id, addr, ok := strings.Cut(kv, "=")
			if !ok || id == "" || addr == "" {
				return nil, fmt.Errorf("--raft-dial-via %q: want id=host:port,…", kv)
			}
			rep.DialVia[id] = addr
		}
	}
	if o.passFile != "" {
		if cfg.RequirePass != "" {
			return nil, errors.New("give --requirepass or --requirepass-file, not both")
		}
		b, err := os.ReadFile(o.passFile)
		if err != nil {
			return nil, fmt.Errorf("requirepass file: %w", err)
		}
		cfg.RequirePass, _, _ = strings.Cut(string(b), "\n")
		cfg.RequirePass = strings.TrimSuffix(cfg.RequirePass, "\r")
		if cfg.RequirePass == "" {
			return nil, fmt.Errorf("requirepass file %s: first line is empty", o.passFile)
		}
	}
	if o.secretFile != "" {
		b, err := os.ReadFile(o.secretFile)
		if err != nil {
			return nil, fmt.Errorf("cluster secret file: %w", err)
		}
		// A trailing newline is an editor's, not the secret's.
		rep.Secret = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(rep.Secret) < memberauth.MinSecret {
			return nil, fmt.Errorf("cluster secret file %s: %d bytes; a secret is at least %d", o.secretFile, len(rep.Secret), memberauth.MinSecret)
		}
		if err := memberauth.Check(rep.Secret); err != nil {
			return nil, fmt.Errorf("cluster secret file %s: %w", o.secretFile, err)
		}
	}
	return hosted, nil
}

// join waits until CLUSTER ADDGROUP names this member in the cluster at
// --cluster-join, and takes its group from the map it gets.
func (o *options) join(log *slog.Logger) error {
	cfg, rep := &o.cfg, &o.cfg.Replication
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	m, err := server.JoinMap(ctx, cfg.DataDir, o.clusterJoin, rep.NodeID, cfg.RequirePass, log)
	stop()
	if err != nil {
		return err
	}
	g, _, _ := m.Member(rep.NodeID)
	rep.Peers, rep.Map = g.Members, m
	return nil
}

// hostedConfigs are the configs of several members of the cluster map hosted
// in this process: each with its own client address (the map's) and data
// directory (under --data-dir), their groups' Raft over one port they all
// share (the map gives them one Raft address).
func hostedConfigs(base server.Config, ids []string, log *slog.Logger) ([]server.Config, *raftmux.Mux, error) {
	m := base.Replication.Map
	if base.HTTPAddr != "" || base.GRPCAddr != "" {
		return nil, nil, errors.New("several --node-id: --http-addr and --grpc-addr are per member, not supported for several members in one process yet")
	}
	var raftAddr string
	groups := map[string]bool{}
	var cfgs []server.Config
	for _, id := range ids {
		g, p, _ := m.Member(id)
		switch {
		case raftAddr != "" && p.RaftAddr != raftAddr:
			return nil, nil, fmt.Errorf("members hosted in one process share one Raft address: %s has %s, not %s", id, p.RaftAddr, raftAddr)
		case groups[g.ID]:
			return nil, nil, fmt.Errorf("two members of group %s in one process", g.ID)
		}
		raftAddr, groups[g.ID] = p.RaftAddr, true
		c := base
		c.Addr = p.ClientAddr
		c.DataDir = filepath.Join(base.DataDir, id)
		c.Replication.NodeID, c.Replication.Peers = id, g.Members
		cfgs = append(cfgs, c)
	}
	guard, err := server.MemberGuard(base)
	if err != nil {
		return nil, nil, err
	}
	listen, advertise := raftAddr, net.Addr(nil)
	if base.Replication.ListenAddr != "" {
		listen, advertise = base.Replication.ListenAddr, raftmux.NamedAddr(raftAddr)
	}
	mux, err := raftmux.ListenAs(listen, advertise, guard, log)
	if err != nil {
		return nil, nil, err
	}
	for i, id := range ids {
		g, _, _ := m.Member(id)
		layer, err := mux.Layer(g.ID)
		if err == nil {
			cfgs[i].Replication.Members, err = mux.Members(g.ID)
		}
		if err != nil {
			mux.Close()
			return nil, nil, err
		}
		cfgs[i].Replication.StreamLayer = layer
	}
	return cfgs, mux, nil
}
