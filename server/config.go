package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/failpoint"
	"github.com/sluice-rl/sluice/persist"
	"github.com/sluice-rl/sluice/server/guard"

	"github.com/sluice-rl/sluice/raftmux"
	"github.com/sluice-rl/sluice/rls"
	"github.com/sluice-rl/sluice/shardmap"
)

// Config is everything a server needs to start. cmd/sluice fills it from
// flags; tests fill it directly.
type Config struct {
	// Addr is the host:port the Redis protocol listens on.
	Addr string
	// DataDir is where state is kept; it is created if missing.
	DataDir string
	// QuotaFsync says when quota changes reach the disk: always (before
	// the reply), everysec or no (see persist.FsyncPolicy).
	QuotaFsync persist.FsyncPolicy
	// SnapshotInterval is how often the whole keyspace is snapshotted
	// when something changed; 0 snapshots only on SAVE, BGSAVE and
	// shutdown.
	SnapshotInterval time.Duration
	// RebuildQuotaStore rebuilds the quota store from the snapshot at
	// startup (a store lost or damaged; see persist.Options).
	RebuildQuotaStore bool
	// RequirePass is the default user's password; empty disables AUTH.
	RequirePass string
	// AuthTimeout closes a connection that has not authenticated this
	// long after it connected, when RequirePass is set (default 10 s; 0
	// never). With a password set, connections that have not
	// authenticated also hold at most half of MaxClients: past that the
	// oldest of them is closed for a new one, so silent connections
	// cannot lock out clients that know the password.
	AuthTimeout time.Duration
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// EnableDebugCommand allows DEBUG (the test clock). Off in production.
	EnableDebugCommand bool
	// MaxClients is the most connections served at once; more are refused
	// with "-ERR max number of clients reached".
	MaxClients int
	// MaxMemory is maxmemory, in bytes (0: no limit, as Redis' default):
	// over it, a command that would store more (a new key, a reservation)
	// answers -OOM and stores nothing, and commands on existing state go
	// on. Nothing is ever evicted (the policy is noeviction). CONFIG SET
	// maxmemory changes it.
	MaxMemory int64
	// GoMemoryLimit, when set, makes the server keep the Go runtime's
	// memory limit (runtime/debug.SetMemoryLimit) at what maxmemory leaves
	// the heap within MemoryLimitFactor of it (memlimit.go). It is the
	// process's: set it for one server a process (cmd/sluice does, unless
	// GOMEMLIMIT is set).
	GoMemoryLimit bool
	// Failpoints are the faults the robustness suite arms (package
	// failpoint): nil, none — as in every binary not built with -tags
	// failpoints.
	Failpoints *failpoint.Points
	// MaxMemoryClients bounds the buffers of every client together (0:
	// a quarter of MaxMemory, at least 32 MiB, or 128 MiB without one):
	// past it, the client holding the most is closed, as Redis 7's
	// maxmemory-clients does.
	MaxMemoryClients int64
	// IdleTimeout closes a connection that sends nothing for this long;
	// 0 keeps idle connections forever, as Redis' default timeout 0 does.
	IdleTimeout time.Duration
	// HTTPAddr is the host:port of the HTTP listener: Prometheus /metrics,
	// the rate limit service's HTTP twin (POST /json, GET /healthcheck);
	// empty disables it. (--metrics-addr is its older name.)
	HTTPAddr string
	// GRPCAddr is the host:port of Envoy's rate limit service
	// (envoy.service.ratelimit.v3.RateLimitService), with gRPC health and
	// reflection; empty disables it.
	GRPCAddr string
	// Doors bound the HTTP and gRPC listeners' connections and how long
	// they may idle or trickle (see DoorLimits).
	Doors DoorLimits
	// MetricsAuth puts /metrics behind RequirePass (Authorization: Bearer
	// or Basic, as the status page); /healthz and /readyz stay open. Off
	// by default: scrapers configured without a token keep working.
	MetricsAuth bool
	// PProf serves Go's profiler under /debug/pprof/ on the HTTP listener
	// (off by default: anyone reaching the port could profile the process).
	PProf bool
	// RLSResponseHeaders fills the rate limit service's
	// response_headers_to_add (RateLimit-Limit/-Remaining/-Reset as
	// envoyproxy/ratelimit, and the draft-10 RateLimit/RateLimit-Policy).
	RLSResponseHeaders bool
	// RLQS bounds the quota streams of the gRPC door: how many are open
	// at once and the bytes of bucket ids each holds (zero fields:
	// rls.QuotaLimits' defaults, 1024 and 1 MiB).
	RLQS rls.QuotaLimits
	// SweepInterval is how often expired keys are swept.
	SweepInterval time.Duration
	// SweepBudget is the most records one sweep round examines, which
	// bounds the time any slot lock is held by the sweeper.
	SweepBudget int
	// SweepGrace is how long an expired key's record stays before the
	// sweep removes it. A key that comes back within it — a limiter's key
	// between two bursts, a short window renewed — is written over in place
	// instead of removed and appended again (garbage, index churn,
	// compactions); an expired key reads as absent either way. It costs
	// memory: keys that never come back stay that much longer.
	SweepGrace time.Duration
	// Version is reported by INFO as sluice_version.
	Version string
	// Protocol bounds what a client may send (bulk length, arguments,
	// inline line length, and tighter limits before AUTH); a violation
	// closes that connection after "-ERR Protocol error: …".
	Protocol guard.Limits
	// IOThreads is how many event loops serve client connections; 0
	// means half the CPUs, at least one (see loopCount). Redis' io-threads
	// is the closest setting.
	IOThreads int
	// LoopSpin is how long an event loop that runs out of ready
	// connections keeps polling its epoll set before it parks in Go's
	// poller: a client at one request per round trip usually sends its
	// next request within tens of microseconds, and catching it by polling
	// saves the park and the wake-up (see poller.wait). 0 parks at once.
	// The polling costs CPU on the loop's own thread only while clients
	// are active.
	LoopSpin time.Duration
	// ProtectedMode refuses clients from non-loopback addresses while no
	// password is set, as Redis' protected-mode does.
	ProtectedMode bool
	// OutputBufferLimit closes a connection whose unsent replies pass this
	// many bytes (a client that pipelines without reading); 0 disables it.
	OutputBufferLimit int
	// TLSCertFile and TLSKeyFile, both PEM, make Addr speak TLS only; both
	// empty serves plain TCP.
	TLSCertFile, TLSKeyFile string
	// AdvertiseAddr is the host:port the cluster topology replies (CLUSTER
	// SLOTS, SHARDS, NODES) announce. Empty announces Addr, or, when Addr's
	// host is a wildcard (0.0.0.0, ::), the local address each client
	// connected to.
	AdvertiseAddr string
	// Replication makes this server a member of a Raft cluster; its Peers
	// empty runs a single node.
	Replication Replication
	// PubSubOutputLimit drops a pub/sub subscriber whose unsent messages
	// pass this many bytes (Redis' client-output-buffer-limit pubsub hard
	// limit, default 32 MiB); 0 disables it.
	PubSubOutputLimit int
	// ThrottledTopWindow is the epoch of the most-refused-keys report
	// (THROTTLED.TOP covers one to two of them); ThrottledTopCapacity the
	// keys it tracks per epoch.
	ThrottledTopWindow   time.Duration
	ThrottledTopCapacity int
	// Rules are the RL.CHECK rule files (envoyproxy/ratelimit YAML): files,
	// or directories whose *.yaml and *.yml files are read. Empty loads
	// none (rules may still be loaded with RL.RULES LOAD).
	Rules []string
}

// Replication is a replicated node's settings (see cluster.Config, whose
// defaults zero values take).
type Replication struct {
	// NodeID is this member's id among Peers.
	NodeID string
	// Peers is every member, this one included.
	Peers []cluster.Peer
	// HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout, CommitTimeout
	// and ApplyTimeout are Raft's timeouts and how long a client waits for
	// its change to commit.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout, CommitTimeout, ApplyTimeout time.Duration
	// SnapshotInterval and SnapshotThreshold: when Raft snapshots.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	// TickInterval is how often an idle leader logs an empty entry so time
	// moves on every replica (0: cluster's default, 1 s).
	TickInterval time.Duration
	// LogSyncInterval syncs the Raft log on a timer instead of every append
	// (0: every append; see cluster.Config).
	LogSyncInterval time.Duration
	// LeaderWritesFirst: a leader writes an entry before it sends it (see
	// cluster.Config; false: beside).
	LeaderWritesFirst bool
	// ClockCatchUp bounds how far a new leader moves a log that fell
	// behind its wall clock forward (0: cluster's default, 24 h; negative:
	// never; see cluster.TakeoverBase).
	ClockCatchUp time.Duration
	// DialVia maps member ids to addresses to dial them at instead of
	// their Raft address.
	DialVia map[string]string
	// ListenAddr is the host:port this member's port (Raft and the
	// members' calls) listens on (empty: its Raft address in Peers). Where
	// that address is a name only others resolve to this host — a
	// Kubernetes pod's DNS name — the port listens on 0.0.0.0 and the
	// name is still what Raft announces, unresolved at start.
	ListenAddr string
	// MemberLimits bound the member port's connections (zero fields:
	// raftmux's defaults): they count in the descriptor budget beside
	// the client doors'.
	MemberLimits raftmux.Limits
	// Map, when set, makes the server a member of a sharded cluster: Peers
	// are its group's members, and the map says which slots each group
	// owns (--cluster-map).
	Map *shardmap.Map
	// StreamLayer, when set, carries this member's Raft instead of a
	// listener of its own: a process hosting members of several groups
	// shares one member port among them (package raftmux).
	StreamLayer raft.StreamLayer
	// Members, with StreamLayer, is the listener of this member's calls
	// from other members on the port it shares (raftmux.Mux.Members).
	Members net.Listener
	// Secret is the cluster's secret (--cluster-secret-file; nil: none):
	// every connection to the member port (Raft and member calls) proves
	// it on both ends first (package raftmux). Without one the member port
	// trusts its network, and the log says so when it listens beyond
	// loopback.
	Secret []byte
}

// Enabled reports whether the server is a replicated node.
func (r Replication) Enabled() bool { return len(r.Peers) > 0 }

// DefaultConfig returns the settings `sluice` runs with when given no
// flags.
func DefaultConfig() Config {
	store := persist.DefaultOptions()
	return Config{
		Addr:          "127.0.0.1:6379",
		DataDir:       store.Dir,
		LogLevel:      "info",
		MaxClients:    10000,
		AuthTimeout:   10 * time.Second,
		Doors:         DefaultDoorLimits(),
		SweepInterval: 100 * time.Millisecond,
		SweepBudget:   2000,
		SweepGrace:    time.Second,
		LoopSpin:      defaultLoopSpin,
		Version:       "0.4.0",
		Protocol:      guard.DefaultLimits(),
		ProtectedMode: true,
		// Redis leaves normal clients unlimited; a bound keeps one client
		// from holding the server's memory hostage.
		OutputBufferLimit: 256 << 20,
		QuotaFsync:        store.QuotaFsync,
		// Kinds other than quotas are only snapshotted: a crash loses
		// at most this much of their changes.
		SnapshotInterval:     store.SnapshotInterval,
		PubSubOutputLimit:    32 << 20,
		ThrottledTopWindow:   time.Minute,
		ThrottledTopCapacity: 1024,
	}
}

// Errors from Validate.
var (
	ErrConfig = errors.New("server: invalid configuration")
)

// maxIOThreads bounds --io-threads (Redis caps io-threads at 128).
const maxIOThreads = 128

// defaultLoopSpin is LoopSpin's default; maxLoopSpin bounds it: a loop
// that polls much longer only burns the CPU its clients' other work needs.
const (
	defaultLoopSpin = 30 * time.Microsecond
	maxLoopSpin     = time.Millisecond
)

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	if err := checkHostPort(c.Addr); err != nil {
		return fmt.Errorf("%w: addr %q: %v", ErrConfig, c.Addr, err)
	}
	if c.PubSubOutputLimit < 0 {
		return fmt.Errorf("%w: pub/sub output limit %d must not be negative", ErrConfig, c.PubSubOutputLimit)
	}
	if c.ThrottledTopWindow <= 0 || c.ThrottledTopCapacity <= 0 || c.ThrottledTopCapacity > 1<<20 {
		return fmt.Errorf("%w: throttled-top window %v and capacity %d must be positive (capacity at most 1048576)",
			ErrConfig, c.ThrottledTopWindow, c.ThrottledTopCapacity)
	}
	if c.GRPCAddr != "" {
		if err := checkHostPort(c.GRPCAddr); err != nil {
			return fmt.Errorf("%w: grpc addr %q: %v", ErrConfig, c.GRPCAddr, err)
		}
	}
	if c.HTTPAddr != "" {
		if err := checkHostPort(c.HTTPAddr); err != nil {
			return fmt.Errorf("%w: http addr %q: %v", ErrConfig, c.HTTPAddr, err)
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fmt.Errorf("%w: TLS needs both a certificate and a key file", ErrConfig)
	}
	if c.TLSCertFile != "" {
		if _, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile); err != nil {
			return fmt.Errorf("%w: TLS certificate %s / key %s: %v", ErrConfig, c.TLSCertFile, c.TLSKeyFile, err)
		}
	}
	if c.AdvertiseAddr != "" {
		if _, port, err := net.SplitHostPort(c.AdvertiseAddr); err != nil || port == "" || checkHostPort(c.AdvertiseAddr) != nil {
			return fmt.Errorf("%w: advertise addr %q: want host:port", ErrConfig, c.AdvertiseAddr)
		}
	}
	if c.DataDir == "" {
		return fmt.Errorf("%w: data dir is empty", ErrConfig)
	}
	if err := (persist.Options{Dir: c.DataDir, QuotaFsync: c.QuotaFsync, SnapshotInterval: c.SnapshotInterval}).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		return err
	}
	if err := c.Doors.Validate(); err != nil {
		return err
	}
	if c.MetricsAuth && c.RequirePass == "" {
		return fmt.Errorf("%w: --metrics-auth needs --requirepass (the password /metrics asks for)", ErrConfig)
	}
	if c.MaxClients < 1 {
		return fmt.Errorf("%w: max clients %d < 1", ErrConfig, c.MaxClients)
	}
	if c.MaxMemory < 0 || c.MaxMemoryClients < 0 {
		return fmt.Errorf("%w: maxmemory %d and maxmemory-clients %d must not be negative", ErrConfig, c.MaxMemory, c.MaxMemoryClients)
	}
	if c.AuthTimeout < 0 {
		return fmt.Errorf("%w: auth timeout %v < 0", ErrConfig, c.AuthTimeout)
	}
	if c.IdleTimeout < 0 {
		return fmt.Errorf("%w: idle timeout %v < 0", ErrConfig, c.IdleTimeout)
	}
	if c.IdleTimeout%time.Second != 0 {
		// Redis' timeout is whole seconds, and CONFIG GET timeout reports
		// seconds: 1500ms would silently run as 1 s.
		return fmt.Errorf("%w: --timeout %v is not a whole number of seconds (Redis' timeout is in seconds: give e.g. 2s or 2)", ErrConfig, c.IdleTimeout)
	}
	if err := c.Protocol.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.OutputBufferLimit < 0 {
		return fmt.Errorf("%w: output buffer limit %d < 0", ErrConfig, c.OutputBufferLimit)
	}
	if c.LoopSpin < 0 || c.LoopSpin > maxLoopSpin {
		return fmt.Errorf("%w: loop spin %v is not between 0 and %v", ErrConfig, c.LoopSpin, maxLoopSpin)
	}
	if c.IOThreads < 0 || c.IOThreads > maxIOThreads {
		return fmt.Errorf("%w: io-threads %d is not between 0 and %d", ErrConfig, c.IOThreads, maxIOThreads)
	}
	if c.SweepInterval <= 0 || c.SweepBudget < 1 {
		return fmt.Errorf("%w: sweep interval and budget must be positive", ErrConfig)
	}
	if c.SweepGrace < 0 {
		return fmt.Errorf("%w: sweep grace %v < 0", ErrConfig, c.SweepGrace)
	}
	if r := c.Replication; r.Secret != nil && !r.Enabled() {
		return fmt.Errorf("%w: --cluster-secret-file is for a cluster's members (--peers, --cluster-map or --cluster-join)", ErrConfig)
	}
	if r := c.Replication; r.Enabled() || r.NodeID != "" {
		if !r.Enabled() {
			return fmt.Errorf("%w: --node-id needs --peers", ErrConfig)
		}
		cc := r.clusterConfig(c.DataDir)
		if err := cc.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if err := r.MemberLimits.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if err := r.checkOwnAddr(c.Addr); err != nil {
			return err
		}
		for _, d := range []time.Duration{r.HeartbeatTimeout, r.ElectionTimeout, r.LeaderLeaseTimeout, r.CommitTimeout, r.ApplyTimeout, r.SnapshotInterval} {
			if d < 0 {
				return fmt.Errorf("%w: raft timeouts must not be negative", ErrConfig)
			}
		}
	}
	return nil
}

// checkOwnAddr refuses an --addr that is not where the other members and
// the cluster's clients are told this member is (its client address in
// --peers or the map): it would serve on one address while redirects,
// CLUSTER NODES and leader probes name another. A wildcard host (all
// interfaces) on the same port serves it, and a host name is the
// resolver's to match; two different IP addresses, or another port, are
// refused.
func (r Replication) checkOwnAddr(addr string) error {
	var own string
	for _, p := range r.Peers {
		if p.ID == r.NodeID {
			own = p.ClientAddr
		}
	}
	if own == "" || own == addr {
		return nil
	}
	host, port, err1 := net.SplitHostPort(addr)
	ownHost, ownPort, err2 := net.SplitHostPort(own)
	if err1 != nil || err2 != nil {
		return nil // the form is checked elsewhere
	}
	ip, ownIP := net.ParseIP(host), net.ParseIP(ownHost)
	switch {
	case port != ownPort:
	case host == "" || (ip != nil && ip.IsUnspecified()):
		return nil
	case ip == nil || ownIP == nil || ip.Equal(ownIP):
		return nil
	}
	return fmt.Errorf("%w: --addr %s is not member %s's client address %s (as its --peers or cluster map gives it, where the other members and clients reach it): "+
		"start it with --addr %s, or on that port on all interfaces", ErrConfig, addr, r.NodeID, own, own)
}

// clusterConfig is the cluster node's configuration in dataDir.
func (r Replication) clusterConfig(dataDir string) cluster.Config {
	return cluster.Config{
		NodeID: r.NodeID, Peers: r.Peers, Dir: filepath.Join(dataDir, "raft"),
		HeartbeatTimeout: r.HeartbeatTimeout, ElectionTimeout: r.ElectionTimeout, LeaderLeaseTimeout: r.LeaderLeaseTimeout,
		CommitTimeout: r.CommitTimeout, ApplyTimeout: r.ApplyTimeout,
		SnapshotInterval: r.SnapshotInterval, SnapshotThreshold: r.SnapshotThreshold, DialVia: r.DialVia,
		TickInterval: r.TickInterval, LogSyncInterval: r.LogSyncInterval, ClockCatchUp: r.ClockCatchUp,
		LeaderWritesFirst: r.LeaderWritesFirst,
		StreamLayer:       r.StreamLayer,
	}
}

// checkHostPort reports an address net.Listen would refuse for its form: no
// port, or a port outside 0–65535 — before anything is created on disk.
func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		if _, lerr := net.LookupPort("tcp", port); lerr != nil {
			return fmt.Errorf("port %q is not a number", port)
		}
		return nil
	}
	if n < 0 || n > 65535 {
		return fmt.Errorf("port %d is outside 0-65535", n)
	}
	return nil
}

// ParseLogLevel turns debug|info|warn|error into a slog level.
func ParseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%w: log level %q: want debug, info, warn or error", ErrConfig, s)
	}
	return l, nil
}
