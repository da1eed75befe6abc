package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/internal/memsize"
	"github.com/sluice-rl/sluice/raftmux"
	"github.com/sluice-rl/sluice/server"
)

// options are the command line: the server's config as the flags set it,
// and the flags that name what resolve reads into it (files, a cluster's
// membership).
type options struct {
	cfg           server.Config
	version, help bool
	passFile      string
	secretFile    string
	peers         string
	clusterJoin   string
	clusterMap    string
	dialVia       string
	gcPercent     int
}

// parseFlags reads the command line.
func parseFlags(args []string) (*options, error) {
	o := &options{cfg: server.DefaultConfig()}
	cfg := &o.cfg
	fs := flag.NewFlagSet("sluice", flag.ContinueOnError)
	// A bad value is one line on stderr (main prints it); the flag list
	// only when asked for with -h.
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "host:port to serve the Redis protocol on")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for persistent state (created if missing)")
	fs.TextVar(&cfg.QuotaFsync, "quota-fsync", cfg.QuotaFsync, "when quota changes reach the disk: always (before the reply), everysec or no")
	fs.DurationVar(&cfg.SnapshotInterval, "snapshot-interval", cfg.SnapshotInterval, "snapshot the keyspace this often when it changed (0: only on SAVE, BGSAVE and shutdown)")
	fs.BoolVar(&cfg.RebuildQuotaStore, "rebuild-quota-store", false, "rebuild a missing or damaged quota store from the snapshot instead of refusing to start (quota changes since the snapshot are lost; a sound store is kept)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.StringVar(&cfg.RequirePass, "requirepass", cfg.RequirePass, "password clients must AUTH with (empty: no AUTH)")
	fs.StringVar(&o.passFile, "requirepass-file", "", "read the AUTH password from this file (first line)")
	fs.StringVar(&o.secretFile, "cluster-secret-file", "", "a file holding the cluster's secret (at least 16 bytes; the same file on every member): every connection to a member port (Raft, members' calls) proves it on both ends before anything is heard")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", cfg.TLSCertFile, "PEM certificate: serve --addr over TLS (with --tls-key-file)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key-file", cfg.TLSKeyFile, "PEM private key for --tls-cert-file")
	fs.BoolVar(&cfg.ProtectedMode, "protected-mode", cfg.ProtectedMode, "refuse non-loopback clients while no password is set")
	fs.Int64Var(&cfg.Protocol.MaxBulkLen, "proto-max-bulk-len", cfg.Protocol.MaxBulkLen, "largest bulk string a client may send, bytes")
	fs.Int64Var(&cfg.Protocol.MaxArgs, "proto-max-args", cfg.Protocol.MaxArgs, "most arguments in one command")
	fs.IntVar(&cfg.OutputBufferLimit, "client-output-buffer-limit", cfg.OutputBufferLimit, "close a client whose unsent replies pass this many bytes (0: no limit)")
	fs.IntVar(&cfg.IOThreads, "io-threads", cfg.IOThreads, "event loops serving client connections (0: half the CPUs, at least one)")
	fs.DurationVar(&cfg.LoopSpin, "loop-spin", cfg.LoopSpin, "how long an idle event loop polls before it parks (0 to 1ms)")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error")
	fs.BoolVar(&cfg.EnableDebugCommand, "enable-debug-command", cfg.EnableDebugCommand, "allow DEBUG CLOCK (tests only)")
	memoryFlag(fs, &cfg.MaxMemory, "maxmemory", "memory limit: bytes, or with kb, mb, gb (k, m, g: powers of 1000), as in redis.conf; over it commands that would store more answer -OOM (0: no limit)")
	memoryFlag(fs, &cfg.MaxMemoryClients, "maxmemory-clients", "budget of every client's buffers together; past it the largest is closed (0: a quarter of --maxmemory, at least 32mb, or 128mb without one)")
	fs.DurationVar(&cfg.AuthTimeout, "auth-timeout", cfg.AuthTimeout, "with --requirepass, close a connection not authenticated this long after it connected (0: never)")
	fs.IntVar(&cfg.MaxClients, "maxclients", cfg.MaxClients, "most client connections at once")
	fs.Func("timeout", "close connections idle this long, whole seconds: a number (as in redis.conf) or a duration such as 5m (0: never)", func(v string) error {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			if n < 0 || n > math.MaxInt32 {
				return fmt.Errorf("%d seconds: want 0 to %d", n, math.MaxInt32)
			}
			cfg.IdleTimeout = time.Duration(n) * time.Second
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("want whole seconds (30) or a duration (5m): %w", err)
		}
		cfg.IdleTimeout = d
		return nil
	})
	doors := &cfg.Doors
	fs.IntVar(&doors.HTTPMaxConns, "http-max-conns", doors.HTTPMaxConns, "most connections --http-addr holds at once; more are closed at once")
	fs.DurationVar(&doors.HTTPIdleTimeout, "http-idle-timeout", doors.HTTPIdleTimeout, "close an HTTP keep-alive connection idle this long")
	fs.DurationVar(&doors.HTTPReadTimeout, "http-read-timeout", doors.HTTPReadTimeout, "longest time to read one HTTP request, headers and body")
	fs.DurationVar(&doors.HTTPWriteTimeout, "http-write-timeout", doors.HTTPWriteTimeout, "longest time to write one HTTP response")
	fs.IntVar(&doors.GRPCMaxConns, "grpc-max-conns", doors.GRPCMaxConns, "most connections --grpc-addr holds at once; more are closed at once")
	fs.DurationVar(&doors.GRPCHandshakeTimeout, "grpc-handshake-timeout", doors.GRPCHandshakeTimeout, "longest time a new gRPC connection may take to finish its HTTP/2 handshake")
	fs.DurationVar(&doors.GRPCIdleTimeout, "grpc-idle-timeout", doors.GRPCIdleTimeout, "close a gRPC connection with no call in flight for this long")
	fs.DurationVar(&doors.GRPCReadTimeout, "grpc-read-timeout", doors.GRPCReadTimeout, "longest time a gRPC call may take, after its headers, to send its request message; past it its connection is closed")
	fs.IntVar(&doors.GRPCMaxStreams, "grpc-max-streams", doors.GRPCMaxStreams, "most calls in flight on one gRPC connection (HTTP/2 max concurrent streams)")
	fs.BoolVar(&cfg.MetricsAuth, "metrics-auth", cfg.MetricsAuth, "/metrics asks for --requirepass (Bearer or Basic) like the status page; /healthz and /readyz stay open")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "host:port for HTTP: Prometheus /metrics, the rate limit service's POST /json and GET /healthcheck (empty: off)")
	fs.StringVar(&cfg.HTTPAddr, "metrics-addr", cfg.HTTPAddr, "the older name of --http-addr")
	fs.BoolVar(&cfg.PProf, "pprof", cfg.PProf, "serve Go's profiler under /debug/pprof/ on --http-addr")
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "host:port for Envoy's rate limit service over gRPC (ShouldRateLimit, health, reflection; empty: off)")
	fs.IntVar(&cfg.RLQS.Streams, "rlqs-max-streams", 1024, "RLQS streams open at once on the gRPC door, all connections together; past it a stream is refused RESOURCE_EXHAUSTED")
	fs.IntVar(&cfg.RLQS.StreamBytes, "rlqs-max-stream-bytes", 1<<20, "bytes of bucket ids (domain, keys, values) one RLQS stream may hold leases of; a report of a new bucket past it is refused RESOURCE_EXHAUSTED")
	fs.BoolVar(&cfg.RLSResponseHeaders, "rls-response-headers", cfg.RLSResponseHeaders, "add RateLimit-Limit/-Remaining/-Reset and RateLimit/RateLimit-Policy to rate limit service responses")
	fs.StringVar(&cfg.AdvertiseAddr, "advertise-addr", cfg.AdvertiseAddr, "host:port cluster topology replies announce (empty: the listen address, or the address each client reached when listening on 0.0.0.0)")
	fs.Func("rules", "RL.CHECK rule file in envoyproxy/ratelimit's YAML, or a directory of *.yaml files (repeat for more); reloaded on SIGHUP and when changed", func(v string) error {
		if v == "" {
			return errors.New("empty path")
		}
		cfg.Rules = append(cfg.Rules, v)
		return nil
	})
	fs.IntVar(&cfg.PubSubOutputLimit, "client-output-buffer-limit-pubsub", cfg.PubSubOutputLimit, "drop a pub/sub subscriber whose unsent messages pass this many bytes (0: no limit)")
	fs.DurationVar(&cfg.ThrottledTopWindow, "throttled-top-window", cfg.ThrottledTopWindow, "epoch of the most-refused-keys report (THROTTLED.TOP covers one to two epochs)")
	fs.IntVar(&cfg.ThrottledTopCapacity, "throttled-top-capacity", cfg.ThrottledTopCapacity, "keys the most-refused-keys report tracks per epoch")
	rep := &cfg.Replication
	fs.StringVar(&rep.NodeID, "node-id", "", "this member's id among --peers (replicated mode)")
	fs.StringVar(&o.peers, "peers", "", "every member of a replicated cluster: id=client-addr[@raft-addr],… (raft-addr defaults to the client port + 10000); empty runs one node")
	fs.StringVar(&o.clusterJoin, "cluster-join", "", "host:port of any member of a running sharded cluster: wait until CLUSTER ADDGROUP names --node-id, then serve as that member of its new group (the map is kept in --data-dir for restarts)")
	fs.StringVar(&o.clusterMap, "cluster-map", "", "a sharded cluster's map, YAML: epoch, and groups with their slots and members; this process is the member --node-id names, in its group (replaces --peers)")
	fs.DurationVar(&rep.HeartbeatTimeout, "raft-heartbeat-timeout", 300*time.Millisecond, "how long a follower waits without hearing from the leader before it stands for election")
	fs.DurationVar(&rep.ElectionTimeout, "raft-election-timeout", 300*time.Millisecond, "how long a candidate waits for votes")
	fs.DurationVar(&rep.LeaderLeaseTimeout, "raft-leader-lease-timeout", 250*time.Millisecond, "how long a leader keeps serving without hearing from a majority (at most the heartbeat timeout)")
	fs.DurationVar(&rep.CommitTimeout, "raft-commit-timeout", 20*time.Millisecond, "longest a follower waits to learn the commit index when nothing else is sent")
	fs.DurationVar(&rep.ApplyTimeout, "raft-apply-timeout", 2*time.Second, "how long a client waits for its change to commit; past it the outcome is unknown and the reply an error")
	fs.DurationVar(&rep.SnapshotInterval, "raft-snapshot-interval", 30*time.Second, "how often Raft checks whether to snapshot")
	fs.Uint64Var(&rep.SnapshotThreshold, "raft-snapshot-threshold", 16384, "entries logged since the last snapshot before Raft takes another")
	fs.DurationVar(&rep.ClockCatchUp, "clock-catch-up", 24*time.Hour, "how far a new leader moves a log whose time fell behind its wall clock (a group that was down) forward to it; negative: never")
	fs.DurationVar(&rep.TickInterval, "raft-tick-interval", time.Second, "how often an idle leader logs an empty entry so time moves on every replica and expired keys go")
	fs.Func("raft-log-sync", "when the Raft log reaches the disk: always (every append, before it counts) or interval:<duration> (on a timer; an append counts once a majority holds it in memory)", func(v string) error {
		switch {
		case v == "always":
			rep.LogSyncInterval = 0
		case strings.HasPrefix(v, "interval:"):
			d, err := time.ParseDuration(strings.TrimPrefix(v, "interval:"))
			if err != nil || d <= 0 {
				return fmt.Errorf("want interval:<positive duration>, e.g. interval:200ms")
			}
			rep.LogSyncInterval = d
		default:
			return fmt.Errorf("want always or interval:<duration>")
		}
		return nil
	})
	fs.Func("raft-leader-write", "when a leader writes a new entry to its own Raft log: parallel (while it sends the entry to its followers; it counts toward the commit once on its disk) or first (before it sends it: hashicorp/raft's order, one more disk write per commit); default parallel", func(v string) error {
		switch v {
		case "parallel":
			rep.LeaderWritesFirst = false
		case "first":
			rep.LeaderWritesFirst = true
		default:
			return fmt.Errorf("want parallel or first")
		}
		return nil
	})
	fs.IntVar(&o.gcPercent, "gc-percent", 400, "Go's GC target (GOGC) unless the GOGC environment variable sets it: the heap may grow this many percent past what is live before a collection (limiter state is off-heap, so the heap is small; -1: Go's default)")
	fs.IntVar(&rep.MemberLimits.MaxConns, "member-max-conns", raftmux.DefaultMaxConns, "connections the member port (Raft and the members' calls) holds at once, pending or serving; past it a connection is closed before anything is read (counted in the open-files budget beside maxclients)")
	fs.StringVar(&rep.ListenAddr, "raft-listen-addr", "", "host:port this member's Raft port (Raft and the members' calls) listens on (empty: its Raft address in --peers or --cluster-map); the map's address stays what others dial, e.g. 0.0.0.0:16379 where the map names a pod's DNS name")
	fs.StringVar(&o.dialVia, "raft-dial-via", "", "dial these members' Raft at other addresses: id=host:port,… (tunnels, NAT, test proxies)")
	failpointsFlag(fs, &cfg.Failpoints)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fmt.Println("usage: sluice [flags]")
			fs.PrintDefaults()
			o.help = true
			return o, nil
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return o, nil
}

// memoryFlag defines a flag taking a memory size as redis.conf writes one
// (100mb, 2gb) into dst.
func memoryFlag(fs *flag.FlagSet, dst *int64, name, usage string) {
	fs.Func(name, usage, func(v string) error {
		n, ok := memsize.Parse(v)
		if !ok {
			return fmt.Errorf("%q: want bytes, or a number with kb, mb or gb", v)
		}
		*dst = n
		return nil
	})
}
