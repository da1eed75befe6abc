// Command sluice is a rate-limit server that speaks the Redis protocol.
//
// It only turns flags into a server.Config and runs the server until
// SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/raftmux"
	"github.com/sluice-rl/sluice/server"
	"github.com/sluice-rl/sluice/shardmap"

	"github.com/sluice-rl/sluice/internal/memsize"
	"github.com/sluice-rl/sluice/memberauth"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := server.DefaultConfig()
	fs := flag.NewFlagSet("sluice", flag.ContinueOnError)
	// A bad value is one line on stderr (main prints it); the flag list
	// only when asked for with -h.
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "host:port to serve the Redis protocol on")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for persistent state (created if missing)")
	fs.TextVar(&cfg.QuotaFsync, "quota-fsync", cfg.QuotaFsync, "when quota changes reach the disk: always (before the reply), everysec or no")
	fs.DurationVar(&cfg.SnapshotInterval, "snapshot-interval", cfg.SnapshotInterval, "snapshot the keyspace this often when it changed (0: only on SAVE, BGSAVE and shutdown)")
	fs.BoolVar(&cfg.RebuildQuotaStore, "rebuild-quota-store", false, "rebuild a missing or damaged quota store from the snapshot instead of refusing to start (quota changes since the snapshot are lost; a sound store is kept)")
	version := fs.Bool("version", false, "print the version and exit")
	fs.StringVar(&cfg.RequirePass, "requirepass", cfg.RequirePass, "password clients must AUTH with (empty: no AUTH)")
	passFile := fs.String("requirepass-file", "", "read the AUTH password from this file (first line)")
	secretFile := fs.String("cluster-secret-file", "", "a file holding the cluster's secret (at least 16 bytes; the same file on every member): every Raft connection proves it on both ends before Raft hears anything")
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
	peers := fs.String("peers", "", "every member of a replicated cluster: id=client-addr[@raft-addr],… (raft-addr defaults to the client port + 10000); empty runs one node")
	clusterJoin := fs.String("cluster-join", "", "host:port of any member of a running sharded cluster: wait until CLUSTER ADDGROUP names --node-id, then serve as that member of its new group (the map is kept in --data-dir for restarts)")
	clusterMap := fs.String("cluster-map", "", "a sharded cluster's map, YAML: epoch, and groups with their slots and members; this process is the member --node-id names, in its group (replaces --peers)")
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
	gcPercent := fs.Int("gc-percent", 400, "Go's GC target (GOGC) unless the GOGC environment variable sets it: the heap may grow this many percent past what is live before a collection (limiter state is off-heap, so the heap is small; -1: Go's default)")
	dialVia := fs.String("raft-dial-via", "", "dial these members' Raft at other addresses: id=host:port,… (tunnels, NAT, test proxies)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fmt.Println("usage: sluice [flags]")
			fs.PrintDefaults()
			return nil
		}
		return err
	}
	if *version {
		fmt.Println("sluice", cfg.Version)
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if _, set := os.LookupEnv("GOGC"); !set && *gcPercent >= 0 {
		// Measured on the gRPC door (rlsbench, 50 callers, four alternating
		// pairs): 400 against Go's 100, +10% calls/s and -15% p99 for ~20
		// MB more resident under load; the heap holds requests in flight,
		// not keys.
		debug.SetGCPercent(*gcPercent)
	}
	if *peers != "" && *clusterMap != "" {
		return errors.New("give --peers or --cluster-map, not both")
	}
	if *clusterJoin != "" && (*peers != "" || *clusterMap != "") {
		return errors.New("give --cluster-join alone: the cluster it joins gives the map")
	}
	if *clusterJoin != "" && rep.NodeID == "" {
		return errors.New("--cluster-join needs --node-id: the member id CLUSTER ADDGROUP will name")
	}
	if *peers != "" {
		list, err := cluster.ParsePeers(*peers)
		if err != nil {
			return err
		}
		rep.Peers = list
	}
	var hosted []string // several members of one map in this process
	if *clusterMap != "" {
		m, err := shardmap.Load(*clusterMap)
		if err != nil {
			return err
		}
		ids := strings.Split(rep.NodeID, ",")
		for _, id := range ids {
			if _, _, ok := m.Member(id); !ok {
				return fmt.Errorf("--node-id %q is not a member of the cluster map %s", id, *clusterMap)
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
	if *dialVia != "" {
		rep.DialVia = map[string]string{}
		for _, kv := range strings.Split(*dialVia, ",") {
			id, addr, ok := strings.Cut(kv, "=")
			if !ok || id == "" || addr == "" {
				return fmt.Errorf("--raft-dial-via %q: want id=host:port,…", kv)
			}
			rep.DialVia[id] = addr
		}
	}
	if *passFile != "" {
		if cfg.RequirePass != "" {
			return errors.New("give --requirepass or --requirepass-file, not both")
		}
		b, err := os.ReadFile(*passFile)
		if err != nil {
			return fmt.Errorf("requirepass file: %w", err)
		}
		cfg.RequirePass, _, _ = strings.Cut(string(b), "\n")
		cfg.RequirePass = strings.TrimSuffix(cfg.RequirePass, "\r")
		if cfg.RequirePass == "" {
			return fmt.Errorf("requirepass file %s: first line is empty", *passFile)
		}
	}
	if *secretFile != "" {
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			return fmt.Errorf("cluster secret file: %w", err)
		}
		// A trailing newline is an editor's, not the secret's.
		rep.Secret = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(rep.Secret) < memberauth.MinSecret {
			return fmt.Errorf("cluster secret file %s: %d bytes; a secret is at least %d", *secretFile, len(rep.Secret), memberauth.MinSecret)
		}
	}
	level, err := server.ParseLogLevel(cfg.LogLevel)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *clusterJoin != "" {
		joinCtx, stopJoin := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		m, err := server.JoinMap(joinCtx, cfg.DataDir, *clusterJoin, rep.NodeID, cfg.RequirePass, log)
		stopJoin()
		if err != nil {
			return err
		}
		g, _, _ := m.Member(rep.NodeID)
		rep.Peers, rep.Map = g.Members, m
	}

	cfgs := []server.Config{cfg}
	logs := []*slog.Logger{log}
	if hosted != nil {
		var mux *raftmux.Mux
		if cfgs, mux, err = hostedConfigs(cfg, hosted, log); err != nil {
			return err
		}
		defer mux.Close()
		logs = logs[:0]
		for _, id := range hosted {
			logs = append(logs, log.With("member", id))
		}
	}
	var srvs []*server.Server
	for i, c := range cfgs {
		srv, err := server.New(c, logs[i], nil)
		if err != nil {
			return err
		}
		if err := srv.Listen(); err != nil {
			return err
		}
		srvs = append(srvs, srv)
	}
	return serve(srvs, log)
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
	mux, err := raftmux.ListenAs(raftAddr, nil, guard, log)
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

// serve runs the servers until SIGINT or SIGTERM (SIGHUP reloads their
// rules), then shuts them down.
func serve(srvs []*server.Server, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	served := make(chan error, len(srvs))
	for _, srv := range srvs {
		go func() { served <- srv.Serve() }()
	}
	var ended error
	running := len(srvs)
wait:
	for {
		select {
		case ended = <-served:
			running--
			if len(srvs) == 1 {
				return ended
			}
			break wait // one member failed: stop the others
		case <-hup:
			for _, srv := range srvs {
				srv.ReloadRules() // logs and counts its own failure
			}
		case <-ctx.Done():
			break wait
		}
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, srv := range srvs {
		errs = append(errs, srv.Shutdown(shutdownCtx))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for ; running > 0; running-- {
		<-served
	}
	if ended != nil {
		return ended
	}
	log.Info("stopped")
	return nil
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
