package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluice-rl/sluice/internal/failpoint"
	"github.com/sluice-rl/sluice/machine"
)

// Errors the node returns; the command layer turns them into replies.
var (
	// ErrNoLeader: no leader is known (an election is under way, or this
	// node is cut off from the majority).
	ErrNoLeader = errors.New("cluster: no leader")
	// ErrNotLeader: this node is not the leader; Leader says who is.
	ErrNotLeader = errors.New("cluster: not the leader")
	// ErrUnknownOutcome: the batch was sent to the log but this node cannot
	// know whether it committed (leadership lost, timed out).
	ErrUnknownOutcome = errors.New("cluster: the outcome is unknown")
	// ErrNotApplied: the batch was logged here but another leader's entry
	// took its place: it did not apply, and a retry is safe.
	ErrNotApplied = errors.New("cluster: the entry was not applied (another leader's entry took its place)")
	// ErrTransferring: leadership is being handed to another member; try
	// again in a moment (nothing was logged).
	ErrTransferring = errors.New("cluster: leadership transfer in progress")
	// ErrConfig: the configuration does not validate.
	ErrConfig = errors.New("cluster: bad configuration")
)

// Config configures a replicated node. Zero durations take the defaults.
type Config struct {
	// NodeID is this node's id; it must be one of Peers.
	NodeID string
	// Peers is every member, this node included. A node with no Raft
	// state bootstraps this configuration.
	Peers []Peer
	// Dir holds the Raft log, stable store and snapshots.
	Dir string
	// HeartbeatTimeout is how long a follower waits without hearing from a
	// leader before it stands for election (default 400 ms).
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits for votes (default
	// 400 ms).
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays leader without
	// hearing from a majority (default 300 ms): a partitioned leader stops
	// serving after it.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is the longest a follower waits to learn the commit
	// index when nothing else is sent (default 20 ms).
	CommitTimeout time.Duration
	// ApplyTimeout bounds how long a client waits for its batch to commit
	// (default 2 s); past it the outcome is unknown.
	ApplyTimeout time.Duration
	// SnapshotInterval and SnapshotThreshold: Raft snapshots when this much
	// time has passed and this many entries were logged since the last
	// (defaults 30 s and 16384); TrailingLogs are kept behind a snapshot
	// for followers to catch up from (default 10240).
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// MaxBatchCommands caps the commands in one log entry (default 4096).
	MaxBatchCommands int
	// MaxInflight is how many entries the leader keeps sent but not yet
	// applied (default 1: measured against 2, 4 and 8 in alternating runs
	// here, one entry in flight gave the most throughput and the lowest
	// p99 at 10 and 50 callers, a lone caller alike: the leader's and the
	// followers' appends are synced one at a time, so a second entry in
	// flight only splits what would have shared a sync); commands arriving
	// meanwhile wait for the next entry, so entries grow with the load.
	MaxInflight int
	// TickInterval is how often an idle leader logs an empty entry so
	// time moves on every replica and expired keys can be swept
	// (default 1 s).
	TickInterval time.Duration
	// Wall is the wall clock, Unix ns: read when a leader takes over, to
	// stamp the very first entry of a log that has never been stamped, and
	// to bring a log that fell behind it (a group that was down) forward.
	Wall func() int64
	// ClockCatchUp bounds how far a new leader moves the log's time
	// forward to its wall clock (TakeoverBase; default 24 h): a group down
	// for a while resumes at real time, and a wall clock far ahead moves
	// it no further. Negative: never (the log's time runs on from its last
	// stamp, as if the downtime had not passed).
	ClockCatchUp time.Duration
	// Mono is a monotonic clock in ns; the leader's stamps advance with it.
	Mono func() int64
	// LogSyncInterval, when positive, syncs the Raft log every interval
	// instead of on every append (syncfs.go): an append counts once a
	// majority holds it in memory; 0 syncs every append (the default).
	LogSyncInterval time.Duration
	// LeaderWritesFirst makes a leader write new entries to its own log
	// before it sends them to its followers (hashicorp/raft's order). By
	// default (false) it sends them while it writes, and counts itself
	// toward their commit once its write is on disk: a commit costs the
	// slower of the two writes, not their sum
	// (third_party/hashicorp-raft/PATCHES.md, patch 2).
	LeaderWritesFirst bool
	// Stores opens the Raft log and stable store in the node's directory;
	// nil uses raft-wal (or the Pebble store a directory already holds; see
	// stores.go).
	Stores func(dir string, log *slog.Logger) (raft.LogStore, raft.StableStore, io.Closer, error)
	// Failpoints arm the robustness suite's faults around log appends
	// (nil: none).
	Failpoints *failpoint.Points
	// Transport, when set, carries Raft instead of TCP on the member's
	// Raft address (an in-process simulation: raft.NewInmemTransport);
	// the node closes it. Members' health notes need the TCP transport.
	Transport raft.Transport
	// StreamLayer, when set, carries Raft over it instead of a TCP listener
	// of the node's own on its Raft address: a server's member port
	// (package raftmux, which proves membership with the cluster's secret
	// and speaks TLS), shared with member calls and, in a process hosting
	// several members, with other groups. The node closes it.
	StreamLayer raft.StreamLayer
	// DialVia maps member ids to the address this node dials them at
	// instead of their Raft address (a tunnel, a NAT, or a test proxy that
	// cuts the link); the Raft configuration keeps the real addresses.
	DialVia map[string]string
	// Log receives the node's events; nil discards.
	Log *slog.Logger
}

func (c *Config) withDefaults() Config {
	d := *c
	def := func(v *time.Duration, x time.Duration) {
		if *v == 0 {
			*v = x
		}
	}
	def(&d.HeartbeatTimeout, 300*time.Millisecond)
	def(&d.ElectionTimeout, 300*time.Millisecond)
	def(&d.LeaderLeaseTimeout, 250*time.Millisecond)
	def(&d.CommitTimeout, 20*time.Millisecond)
	def(&d.ApplyTimeout, 2*time.Second)
	def(&d.SnapshotInterval, 30*time.Second)
	def(&d.TickInterval, time.Second)
	def(&d.ClockCatchUp, 24*time.Hour)
	if d.SnapshotThreshold == 0 {
		d.SnapshotThreshold = 16384
	}
	if d.TrailingLogs == 0 {
		d.TrailingLogs = 10240
	}
	if d.MaxBatchCommands == 0 {
		d.MaxBatchCommands = 4096
	}
	if d.MaxInflight == 0 {
		d.MaxInflight = 1
	}

	if d.Wall == nil {
		d.Wall = func() int64 { return time.Now().UnixNano() }
	}
	if d.Mono == nil {
		start := time.Now()
		d.Mono = func() int64 { return int64(time.Since(start)) }
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return d
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.NodeID == "" || c.Dir == "" {
		return fmt.Errorf("%w: a node id and a directory are needed", ErrConfig)
	}
	if c.self() == nil {
		return fmt.Errorf("%w: node id %q is not among the peers", ErrConfig, c.NodeID)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"heartbeat timeout", c.HeartbeatTimeout}, {"election timeout", c.ElectionTimeout},
		{"leader lease timeout", c.LeaderLeaseTimeout}, {"commit timeout", c.CommitTimeout},
		{"apply timeout", c.ApplyTimeout}, {"snapshot interval", c.SnapshotInterval}, {"tick interval", c.TickInterval},
		{"log sync interval", c.LogSyncInterval}} {
		if d.v < 0 {
			return fmt.Errorf("%w: the %s must not be negative (%s)", ErrConfig, d.name, d.v)
		}
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout && c.HeartbeatTimeout != 0 {
		return fmt.Errorf("%w: the leader lease (%s) must not exceed the heartbeat timeout (%s)", ErrConfig, c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	return nil
}

func (c *Config) self() *Peer {
	for i := range c.Peers {
		if c.Peers[i].ID == c.NodeID {
			return &c.Peers[i]
		}
	}
	return nil
}

// Node is one member of a replicated sluice cluster: Raft, the state
// machine it drives, and the batcher that turns connections' commands into
// log entries.
type Node struct {
	cfg    Config
	log    *slog.Logger
	raft   *raft.Raft
	fsm    *fsm
	trans  raft.WithClose
	stores io.Closer

	// clientAddrs maps member ids to their Redis-protocol addresses.
	mu          sync.Mutex
	clientAddrs map[string]string
	raftAddrs   map[string]string

	// props are the entries this node logged whose clients wait.
	props *proposals
	// health is what this node, leading, last heard from each member;
	// notes what the leader last said of them, following.
	health peerHealth
	notes  peerNotes
	// serving is set once this node is leader and has applied everything
	// before its term (a barrier): only then does it stamp entries.
	serving atomic.Bool
	clock   atomic.Pointer[LeaderClock]
	// lastEntry is the monotonic instant the last entry was sent.
	lastEntry atomic.Int64
	batches   chan *Pending
	stop      chan struct{}
	wg        sync.WaitGroup
	// leaderChanges counts leadership changes seen here.
	leaderChanges atomic.Int64
	batchSizes    batchHistogram
	commitLatency latencyHistogram
}

// NewNode starts a node over m, which must be empty: the state comes from
// the Raft snapshot and log.
func NewNode(cfg Config, m *machine.Machine) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if points := cfg.Failpoints; points.Armed(failpoint.WallClock) {
		// The robustness suite steps this member's clock.
		wall := cfg.Wall
		cfg.Wall = func() int64 { return wall() + int64(points.Offset(failpoint.WallClock)) }
	}
	self := cfg.self()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	hlog := newHCLog("raft", cfg.Log)
	props := newProposals()
	n := &Node{cfg: cfg, log: cfg.Log, fsm: &fsm{m: m, mono: cfg.Mono, log: cfg.Log, props: props}, props: props,
		clientAddrs: map[string]string{}, raftAddrs: map[string]string{},
		batches: make(chan *Pending, 1024), stop: make(chan struct{})}
	n.fsm.extensions = n.applyExtensions
	trace, err := openApplyTrace(cfg.Failpoints, cfg.NodeID, props.id)
	if err != nil {
		return nil, err
	}
	n.fsm.trace = trace
	for _, p := range cfg.Peers {
		n.clientAddrs[p.ID] = p.ClientAddr
		n.raftAddrs[p.ID] = p.RaftAddr
	}
	stores := cfg.Stores
	if stores == nil {
		stores = storesSyncing(cfg.LogSyncInterval)
	}
	logs, stable, closer, err := stores(cfg.Dir, cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("cluster: open the Raft log in %s: %w", cfg.Dir, err)
	}
	n.stores = closer
	if cfg.Failpoints != nil {
		logs = failingLog{LogStore: logs, points: cfg.Failpoints}
	}
	// Followers are sent entries just written: a cache of the newest ones
	// spares the store those reads.
	if cached, err := raft.NewLogCache(4096, logs); err == nil {
		logs = cached
	}
	files, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
	if err != nil {
		closer.Close()
		return nil, fmt.Errorf("cluster: snapshots in %s: %w", cfg.Dir, err)
	}
	var snaps raft.SnapshotStore = files
	if cfg.Failpoints != nil {
		snaps = failingSnapshots{SnapshotStore: files, points: cfg.Failpoints}
	}
	var trans raft.Transport
	if cfg.Transport != nil {
		trans = cfg.Transport
		n.trans, _ = cfg.Transport.(raft.WithClose)
		if n.trans == nil {
			n.trans = noClose{}
		}
	} else {
		var tcp *raft.NetworkTransport
		if stream := cfg.StreamLayer; stream != nil {
			tcp = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: stream,
				ServerAddressProvider: dialVia{n}, Logger: hlog, MaxPool: 3, Timeout: 5 * time.Second})
		} else {
			addr, err := net.ResolveTCPAddr("tcp", self.RaftAddr)
			if err != nil {
				closer.Close()
				return nil, fmt.Errorf("cluster: raft address %s: %w", self.RaftAddr, err)
			}
			if tcp, err = raft.NewTCPTransportWithConfig(self.RaftAddr, addr, &raft.NetworkTransportConfig{
				ServerAddressProvider: dialVia{n}, Logger: hlog, MaxPool: 3, Timeout: 5 * time.Second}); err != nil {
				closer.Close()
				return nil, fmt.Errorf("cluster: listen for Raft on %s: %w", self.RaftAddr, err)
			}
		}
		n.trans = tcp
		trans = &trackingTransport{NetworkTransport: tcp, health: &n.health}
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.MaxAppendEntries = 256
	rc.BatchApplyCh = true
	rc.LeaderParallelWrite = !cfg.LeaderWritesFirst
	rc.Logger = hlog
	rc.NoLegacyTelemetry = true
	// Notes in entries already logged are history (peernote.go).
	if last, err := logs.LastIndex(); err == nil {
		n.notes.liveFrom = last
	}
	existing, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		n.closeTransport()
		return nil, fmt.Errorf("cluster: read Raft state in %s: %w", cfg.Dir, err)
	}
	n.raft, err = raft.NewRaft(rc, n.fsm, logs, stable, snaps, trans)
	if err != nil {
		n.closeTransport()
		return nil, fmt.Errorf("cluster: start Raft: %w", err)
	}
	if !existing {
		var servers []raft.Server
		for _, p := range cfg.Peers {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
		}
		// Every member is given the same list; bootstrapping it on each is
		// safe, and whichever wins the first election leads.
		if err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.Close()
			return nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	n.wg.Add(3)
	go n.watchLeadership()
	go n.runBatches()
	go n.tick()
	return n, nil
}

func (n *Node) closeTransport() {
	n.trans.Close()
	n.stores.Close()
}

// Close stops the node: Raft shuts down (the log is already on disk), the
// loops end, the stores close.
func (n *Node) Close() error {
	select {
	case <-n.stop:
		return nil
	default:
	}
	close(n.stop)
	err := n.raft.Shutdown().Error()
	n.wg.Wait()
	n.props.failAll(fmt.Errorf("%w: %w", ErrUnknownOutcome, raft.ErrRaftShutdown))
	n.trans.Close()
	if cerr := n.stores.Close(); err == nil {
		err = cerr
	}
	n.fsm.trace.close()
	return err
}

// noClose is a transport's closer when it has none.
type noClose struct{}

func (noClose) Close() error { return nil }

// dialVia is where this node dials each member: Config.DialVia, else the
// member's Raft address.
type dialVia struct{ n *Node }

func (d dialVia) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if a, ok := d.n.cfg.DialVia[string(id)]; ok {
		return raft.ServerAddress(a), nil
	}
	d.n.mu.Lock()
	a, ok := d.n.raftAddrs[string(id)]
	d.n.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("cluster: no address for member %s", id)
	}
	return raft.ServerAddress(a), nil
}

// Machine is the state machine the node drives.
func (n *Node) Machine() *machine.Machine { return n.fsm.m }
