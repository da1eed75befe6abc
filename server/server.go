package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/sluice-rl/sluice/clock"
	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/crossgroup"
	"github.com/sluice-rl/sluice/hot"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/member"
	"github.com/sluice-rl/sluice/persist"
	"github.com/sluice-rl/sluice/pubsub"
	"github.com/sluice-rl/sluice/raftmux"
	"github.com/sluice-rl/sluice/rls"
	"github.com/sluice-rl/sluice/shardmap"
	"github.com/sluice-rl/sluice/slotmove"
)

// Server is one sluice node.
type Server struct {
	// staleMap is set once this member has said its cluster map is older
	// than its group's.
	staleMap bool
	// goMemoryLimit is the Go memory limit last set (memlimit.go).
	goMemoryLimit int64
	cfg           Config
	log           *slog.Logger
	env           *commands.Env
	// born is when the server was made: latencies are measured from it on
	// the monotonic clock.
	born time.Time
	// rules are the --rules files (nil without any).
	rules *rulesState
	// router is a sharded member's (nil otherwise; shards.go), coord its
	// coordinator of checks across groups.
	router *shardmap.Router
	// claims are what the probes of the other groups have shown
	// (shards.go): whether each was heard before deciding, the conflicts
	// last said.
	claims claimsHeard
	// moves drives this group's slot migrations while it leads.
	moves *slotmove.Driver
	coord *crossgroup.Coordinator
	table *commands.Table
	// mux is the member port this member listens on (nil when the
	// process gave it a layer of a shared one); memberLn its member
	// calls' listener, members their server (members.go).
	mux      *raftmux.Mux
	memberLn net.Listener
	members  *member.Server
	// memberClient calls other members; guard is how member ports are
	// kept (the secret, TLS), this one's and those it dials.
	memberClient *member.Client
	guard        raftmux.Guard

	ln net.Listener
	// http serves --http-addr; grpc and rls --grpc-addr (server/frontdoor.go).
	http    *http.Server
	grpc    *grpc.Server
	rls     *rls.Service
	decider *rls.NodeDecider
	// httpLn and grpcLn cap the doors' connections (doorlimits.go).
	httpLn, grpcLn *cappedListener
	// httpRaw and grpcRaw are the doors' sockets, bound by New before the
	// node joins its Raft group, so a door that cannot bind stops the
	// process before it takes part in elections (doors.go).
	httpRaw, grpcRaw net.Listener
	// grpcGuard bounds the gRPC door's streams before their bodies.
	grpcGuard *rls.Guard
	// cert is the --tls-cert-file certificate (nil: plain TCP), and
	// tlsConfig what client connections shake hands with.
	cert      *tls.Certificate
	tlsConfig *tls.Config
	// loops serve the client connections (loop_linux.go).
	loops     []*eventLoop
	loopsDone sync.WaitGroup
	// status keeps the last minute of decision counters for the status
	// page (status.go).
	status statusSampler
	nextID atomic.Int64
	// clientBytes is every connection's replies queued and not yet sent
	// (clientmem.go).
	clientBytes atomic.Int64
	// givingBack: a collection for a closed client's buffers runs.
	givingBack atomic.Bool
	// unauthenticated counts the connections that have yet to give the
	// password (preauth.go).
	unauthenticated atomic.Int64
	clients         clientRegistry
	// conns counts the connection goroutines, which Shutdown waits for.
	conns sync.WaitGroup
	// store persists the keyspace (server/persist.go) on a single node.
	store *persist.Store
	// node is the Raft member on a replicated node.
	node *cluster.Node

	stop     chan struct{}
	bg       sync.WaitGroup
	stopOnce sync.Once
}

// New prepares a server: it validates cfg and creates the data directory,
// but does not listen yet. clk may be nil for the wall clock.
func New(cfg Config, log *slog.Logger, clk *clock.Clock) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if clk == nil {
		clk = clock.New(nil)
	}
	s := &Server{cfg: cfg, log: log}
	// Rule files are configuration: read and checked before the data
	// directory is touched.
	if err := s.readRulesAtStart(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("server: create data dir: %w", err)
	}
	// Whose state the directory holds, before anything reads or writes it.
	if err := checkIdentity(&cfg, log); err != nil {
		return nil, err
	}
	var nodeID string
	var err error
	if cfg.Replication.Enabled() {
		// Derived, so every member names every other alike; the file keeps
		// what CLUSTER MYID answers.
		for _, p := range cfg.Replication.Peers {
			if p.ID == cfg.Replication.NodeID {
				nodeID = cluster.MemberNodeID(p.ID, p.RaftAddr)
			}
		}
		if err := cluster.KeepNodeID(cfg.DataDir, nodeID); err != nil {
			return nil, err
		}
	} else if nodeID, err = cluster.LoadNodeID(cfg.DataDir); err != nil {
		return nil, err
	}
	m := machine.New(machine.Options{Log: log})
	table := commands.NewTable(m)
	*s = Server{
		cfg:   cfg,
		log:   log,
		rules: s.rules,
		table: table,
		stop:  make(chan struct{}),
		born:  time.Now(),
		env: &commands.Env{
			Machine: m,
			Clock:   clk,
			Table:   table,
			Stats:   &commands.Stats{},
			Options: commands.Options{
				RequirePass:        cfg.RequirePass,
				EnableDebug:        cfg.EnableDebugCommand,
				Version:            cfg.Version,
				Addr:               cfg.Addr,
				DataDir:            cfg.DataDir,
				MaxClients:         cfg.MaxClients,
				IdleTimeoutSeconds: int64(cfg.IdleTimeout / time.Second),
				AdvertiseAddr:      cfg.AdvertiseAddr,
				LogLevel:           cfg.LogLevel,
				ProtectedMode:      cfg.ProtectedMode,
				ProtoMaxBulkLen:    cfg.Protocol.MaxBulkLen,
				OutputBufferLimit:  cfg.OutputBufferLimit,
			},
			NodeID:  nodeID,
			Started: clk.Now(),
			RunID:   randomHex(20),
		},
	}
	s.clients.init(&s.env.Stats.ConnectedClients)
	s.env.Clients = &s.clients
	s.env.PubSub = pubsub.New()
	sketch, err := hot.New(hot.Config{Capacity: cfg.ThrottledTopCapacity, Window: int64(cfg.ThrottledTopWindow)})
	if err != nil {
		return nil, err
	}
	s.env.Hot = &commands.HotKeys{Sketch: sketch, Now: s.monotonic}
	s.env.Tunables.MaxClients.Store(int64(cfg.MaxClients))
	s.env.Tunables.IdleTimeoutSeconds.Store(int64(cfg.IdleTimeout / time.Second))
	s.env.Tunables.MaxMemory.Store(cfg.MaxMemory)
	s.env.Tunables.MaxMemoryClients.Store(cfg.MaxMemoryClients)
	s.env.SampleMemory()
	if err := s.bindDoors(); err != nil {
		return nil, err
	}
	if cfg.Replication.Enabled() {
		if err := s.startNode(); err != nil {
			s.unbindDoors()
			return nil, err
		}
	} else if err := s.openStore(); err != nil {
		s.unbindDoors()
		return nil, err
	}
	if err := s.startRules(); err != nil {
		s.unbindDoors()
		s.closeStore()
		if s.node != nil {
			s.node.Close()
		}
		s.closeMemberPort()
		return nil, err
	}
	return s, nil
}

// warnOpenMemberPort says so when the member port listens beyond loopback
// without a cluster secret: anyone who reaches it can take part in Raft
// and make members' calls.
func (s *Server) warnOpenMemberPort() {
	r := s.cfg.Replication
	if r.Secret != nil {
		return
	}
	for _, p := range r.Peers {
		if p.ID != r.NodeID {
			continue
		}
		host, _, err := net.SplitHostPort(p.RaftAddr)
		if ip := net.ParseIP(host); err == nil && (ip == nil || !ip.IsLoopback()) && host != "localhost" {
			s.log.Warn("the member port (Raft and the members' calls of each other) listens beyond loopback without --cluster-secret-file: whoever reaches it can take part in the cluster's Raft and ask for what only members may; give every member the same secret file, or keep the port on a network only members reach",
				"raft_addr", p.RaftAddr)
		}
	}
}

// startNode makes this server a member of its Raft cluster: the state
// comes from the Raft snapshot and log (no quota store, no snapshot file),
// machine commands go through the log, and topology replies describe the
// cluster.
func (s *Server) startNode() error {
	cc := s.cfg.Replication.clusterConfig(s.cfg.DataDir)
	cc.Log, cc.Failpoints = s.log, s.cfg.Failpoints
	s.warnOpenMemberPort()
	// With --tls-cert-file the member port speaks TLS too.
	if err := s.loadCert(); err != nil {
		return err
	}
	var err error
	if s.guard, err = guardOf(s.cfg.Replication, s.cert, s.cfg.TLSCertFile); err != nil {
		return err
	}
	if err := s.openMemberPort(&cc); err != nil {
		return err
	}
	n, err := cluster.NewNode(cc, s.env.Machine)
	if err != nil {
		s.closeMemberPort()
		return err
	}
	s.node = n
	s.env.Cluster = n
	router, err := s.shardedRouter()
	if err != nil {
		n.Close()
		s.closeMemberPort()
		return err
	}
	s.env.Applier = commands.Replicated{Node: n}
	s.memberClient = member.NewClient(member.ClientConfig{Secret: s.guard.Secret, TLS: s.guard.ClientTLS})
	if router != nil {
		s.router = router
		s.env.Shards = router
		s.env.Applier = commands.Replicated{Node: n, Shards: router, Fenced: s.servesSlots}
		// Members call each other on the member port (parts of checks,
		// configuration, slots' imports, reports; package member).
		s.coord, err = crossgroup.New(crossgroup.Config{Router: router, Machine: s.env.Machine, Log: s.log,
			Members: s.memberClient, MemberAt: s.memberAt,
			OwnLeader: func() (string, bool) {
				_, addr, ok := n.Leader()
				return addr, ok && addr != ""
			},
			LocalPlace: commands.Replicated{Node: n}.LocalPlace, LocalPart: commands.Replicated{Node: n}.LocalPart, ReportOf: s.groupReport,
			Failpoints: s.cfg.Failpoints})
		if err != nil {
			n.Close()
			s.closeMemberPort()
			return err
		}
		s.env.CrossGroup = s.coord
		s.moves, err = slotmove.New(slotmove.Config{Router: router, Machine: s.env.Machine, Log: s.log, NodeID: s.env.NodeID,
			Serving: n.Serving, PlaceGroup: s.coord.PlaceGroup, PlaceMember: s.coord.PlaceMember, Propagate: s.coord.PropagateExcept,
			ReportOf: s.groupReport,
			Apply:    commands.Replicated{Node: n}.ApplyOne})
		if err != nil {
			n.Close()
			s.closeMemberPort()
			return err
		}
		s.env.Migrations = s.moves
	}
	s.env.Snapshots = &raftSnapshots{n: n}
	if err := s.serveMembers(); err != nil {
		n.Close()
		s.closeMemberPort()
		return err
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}

// Listen binds the Redis protocol address (and the metrics address).
func (s *Server) Listen() error {
	raw, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("server: listen: %w", err)
	}
	return s.ListenOn(raw)
}

// loadCert reads --tls-cert-file and --tls-key-file once (nil cert: plain
// TCP): the doors serve with it, and the members of a sharded cluster
// trust it when they call each other.
func (s *Server) loadCert() error {
	if s.cert != nil || s.cfg.TLSCertFile == "" {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(s.cfg.TLSCertFile, s.cfg.TLSKeyFile)
	if err != nil {
		return fmt.Errorf("server: TLS certificate %s / key %s: %w", s.cfg.TLSCertFile, s.cfg.TLSKeyFile, err)
	}
	s.cert = &cert
	return nil
}

// ListenOn serves the Redis protocol on raw, which the server then owns
// (tests pass listeners of their own).
func (s *Server) ListenOn(raw net.Listener) error {
	if err := s.loadCert(); err != nil {
		raw.Close()
		return err
	}
	if s.cert != nil {
		// The handshake runs on a goroutine of its own (admitTLS), so a
		// slow client never holds up Accept.
		s.tlsConfig = &tls.Config{Certificates: []tls.Certificate{*s.cert}, MinVersion: tls.VersionTLS12}
	}
	ln := raw
	s.ln = ln
	s.env.Options.Addr = ln.Addr().String()
	s.fitMaxClients()
	s.env.Tunables.FitClients = s.fitClients
	if err := s.listenFrontDoors(); err != nil {
		ln.Close()
		return err
	}
	return nil
}

// Serve answers connections until Shutdown. Call Listen first.
func (s *Server) Serve() error {
	if s.ln == nil {
		return errors.New("server: Serve before Listen")
	}
	if err := s.startLoops(); err != nil {
		return fmt.Errorf("server: event loops: %w", err)
	}
	s.bg.Add(1)
	go s.clients.tick(s.stop, s.bg.Done, func() {
		s.closeIdle()
		s.env.SampleMemory()
		s.fitGoMemoryLimit()
		s.sampleClientMemory()
	})
	s.bg.Add(1)
	go s.sweep()
	if s.http != nil {
		s.bg.Add(1)
		go s.runStatusSampler()
	}
	if s.rules != nil {
		s.bg.Add(1)
		go s.watchRules()
	}
	if s.router != nil {
		s.bg.Add(1)
		go s.shardLoop()
	}
	if s.node != nil {
		s.bg.Add(1)
		go s.levelLoop()
	} else {
		s.raiseLevelAlone()
	}
	s.log.Info("sluice ready", "addr", s.ln.Addr().String(), "version", s.cfg.Version)
	s.conns.Add(1) // the accept loop, so that Shutdown waits for it too
	return s.acceptLoop()
}

// Shutdown stops accepting, closes every connection and stops background
// work.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stop) })
	var err error
	if s.ln != nil {
		if cerr := s.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = cerr
		}
	}
	s.closeFrontDoors(ctx)
	s.unbindDoors() // bound by New, never served (Listen failed)
	// Every connection goroutine sees its socket closed, finishes the
	// command it runs and exits; the final snapshot comes after them.
	s.clients.closeAll()
	done := make(chan struct{})
	go func() { s.conns.Wait(); s.stopLoops(); s.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.moves != nil {
		s.moves.Close() // a job in flight is resumed by the next leader
	}
	if s.coord != nil {
		s.coord.Close() // the settles and cancels in flight go out first
	}
	if serr := s.closeStore(); err == nil {
		err = serr
	}
	if s.members != nil {
		s.members.Stop()
	}
	if s.memberClient != nil {
		s.memberClient.Close()
	}
	if s.node != nil {
		if nerr := s.node.Close(); err == nil {
			err = nerr
		}
	}
	s.closeMemberPort()
	return err
}

// isLoopback reports whether addr is on the loopback interface (or a Unix
// socket, which is local by construction).
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return true
	}
	return tcp.IP.IsLoopback()
}

// protectedModeReply is Redis' protected-mode explanation, with sluice's
// flags.
const protectedModeReply = "-DENIED sluice is running in protected mode because protected mode is enabled and no password is set for the default user. " +
	"In this mode connections are only accepted from the loopback interface. " +
	"If you want to connect from external computers to sluice you may adopt one of the following solutions: " +
	"1) Set a password for the default user with --requirepass or --requirepass-file. " +
	"2) Restart sluice with --protected-mode=false, however MAKE SURE sluice is not publicly accessible from the internet if you do so. " +
	"3) Listen only on an address that untrusted hosts cannot reach (--addr). " +
	"NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n"

// sweep deletes expired keys in the background, a bounded batch per tick,
// as Redis' active expiry does: a batch that finds at least a quarter of
// its records expired is followed by another at once (up to maxSweepRounds
// per tick), so a mass expiry is caught up quickly, while a keyspace of
// live keys costs one small batch per tick. No lock is held longer than
// one slot's share of a batch.
const maxSweepRounds = 25

func (s *Server) sweep() {
	defer s.bg.Done()
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	var cursor keyspace.SweepCursor
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		// The idle tick: time moves through the machine's door, as a
		// replicated leader's tick would, and the sweep then removes only
		// keys already expired at the applied instant.
		if s.node == nil {
			// On a replicated node only the log moves time (the leader's
			// idle tick); every node sweeps what has expired by it.
			s.env.Machine.Advance(s.env.Clock.Now())
		}
		for range maxSweepRounds {
			examined, removed := s.env.Machine.Sweep(&cursor, s.cfg.SweepBudget, s.cfg.SweepGrace)
			s.env.Stats.ExpiredKeys.Add(int64(removed))
			if removed*4 < examined || examined == 0 {
				break
			}
		}
	}
}
