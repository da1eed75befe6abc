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
	"net/http/pprof"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tidwall/redcon"

	"github.com/sluice-rl/sluice/clock"
	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/persist"
	"github.com/sluice-rl/sluice/server/guard"
)

// Server is one sluice node.
type Server struct {
	cfg   Config
	log   *slog.Logger
	env   *commands.Env
	table *commands.Table

	ln      net.Listener
	rc      *redcon.Server
	metrics *http.Server
	nextID  atomic.Int64
	clients clientRegistry
	// store persists the keyspace (server/persist.go).
	store *persist.Store

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
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("server: create data dir: %w", err)
	}
	nodeID, err := cluster.LoadNodeID(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	table := commands.NewTable()
	s := &Server{
		cfg:   cfg,
		log:   log,
		table: table,
		stop:  make(chan struct{}),
		env: &commands.Env{
			Keys:  keyspace.New(),
			Clock: clk,
			Table: table,
			Stats: &commands.Stats{},
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
	s.clients.init()
	s.env.Clients = &s.clients
	s.env.Tunables.MaxClients.Store(int64(cfg.MaxClients))
	s.env.Tunables.IdleTimeoutSeconds.Store(int64(cfg.IdleTimeout / time.Second))
	if err := s.openStore(); err != nil {
		return nil, err
	}
	return s, nil
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

// ListenOn serves the Redis protocol on raw, which the server then owns
// (tests pass listeners of their own).
func (s *Server) ListenOn(raw net.Listener) error {
	if s.cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.cfg.TLSCertFile, s.cfg.TLSKeyFile)
		if err != nil {
			raw.Close()
			return fmt.Errorf("server: TLS certificate %s / key %s: %w", s.cfg.TLSCertFile, s.cfg.TLSKeyFile, err)
		}
		// The handshake runs on the connection's first read, in its own
		// goroutine, so a slow client never holds up Accept.
		raw = tls.NewListener(raw, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	// Every byte a client sends passes the guard before redcon parses it.
	ln, err := guard.NewListener(raw, s.cfg.Protocol, s.cfg.RequirePass != "")
	if err != nil {
		raw.Close()
		return fmt.Errorf("server: %w", err)
	}
	s.ln = ln
	s.env.Options.Addr = ln.Addr().String()
	if s.cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", s.cfg.MetricsAddr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("server: listen metrics: %w", err)
		}
		reg := prometheus.NewRegistry()
		if err := NewMetrics(s.env).Register(reg); err != nil {
			ln.Close()
			mln.Close()
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go s.metrics.Serve(mln)
		s.log.Info("metrics endpoint", "addr", mln.Addr().String())
	}
	return nil
}

// Serve answers connections until Shutdown. Call Listen first.
func (s *Server) Serve() error {
	if s.ln == nil {
		return errors.New("server: Serve before Listen")
	}
	rc := redcon.NewServer(s.cfg.Addr, s.handle, s.accept, s.closed)
	if s.cfg.IdleTimeout > 0 {
		rc.SetIdleClose(s.cfg.IdleTimeout)
	}
	rc.AcceptError = func(err error) { s.log.Warn("accept", "err", err) }
	s.rc = rc
	s.env.Tunables.OnIdleTimeout = func(seconds int64) { rc.SetIdleClose(time.Duration(seconds) * time.Second) }
	s.bg.Add(1)
	go s.clients.tick(s.stop, s.bg.Done)
	s.bg.Add(1)
	go s.sweep()
	s.log.Info("sluice ready", "addr", s.ln.Addr().String(), "version", s.cfg.Version)
	return rc.Serve(s.ln)
}

// Shutdown stops accepting, closes every connection and stops background
// work.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stop) })
	var err error
	if s.rc != nil {
		err = s.rc.Close()
	} else if s.ln != nil {
		err = s.ln.Close()
	}
	if s.metrics != nil {
		s.metrics.Shutdown(ctx)
	}
	done := make(chan struct{})
	go func() { s.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if serr := s.closeStore(); err == nil {
		err = serr
	}
	return err
}

// connState is what the server keeps per connection.
type connState struct {
	ctx    commands.Ctx
	conn   commands.Conn
	writer commands.Writer
	closed bool
	// guard is the connection's protocol guard; it learns when AUTH
	// succeeds so the pre-AUTH limits stop applying.
	guard  *guard.Conn
	authed bool
	// pending counts reply bytes not yet flushed to the client.
	pending int
	// counted is how many bytes the guard had read when the last pipeline
	// was added to the input counter.
	counted uint64
	// reg is what CLIENT LIST and CLIENT KILL read from other connections.
	reg connReg
}

func (s *Server) accept(c redcon.Conn) bool {
	st := s.env.Stats
	st.ConnectionsReceived.Add(1)
	if s.cfg.ProtectedMode && s.cfg.RequirePass == "" && !isLoopback(c.NetConn().RemoteAddr()) {
		st.ConnectionsRejected.Add(1)
		c.NetConn().Write([]byte(protectedModeReply))
		return false
	}
	if st.ConnectedClients.Add(1) > s.env.Tunables.MaxClients.Load() {
		st.ConnectedClients.Add(-1)
		st.ConnectionsRejected.Add(1)
		c.NetConn().Write([]byte("-ERR max number of clients reached\r\n"))
		return false
	}
	cs := &connState{}
	cs.conn = commands.Conn{
		ID:            s.nextID.Add(1),
		Addr:          c.RemoteAddr(),
		LocalAddr:     c.NetConn().LocalAddr().String(),
		Proto:         2,
		Authenticated: s.cfg.RequirePass == "",
		Created:       s.env.Clock.Now(),
	}
	cs.writer.Proto = 2
	cs.ctx = commands.Ctx{Env: s.env, Conn: &cs.conn, W: &cs.writer}
	cs.guard, _ = c.NetConn().(*guard.Conn)
	cs.authed = cs.conn.Authenticated
	s.clients.add(cs, c.NetConn())
	c.SetContext(cs)
	return true
}

func (s *Server) closed(c redcon.Conn, err error) {
	if cs, ok := c.Context().(*connState); ok {
		s.clients.remove(cs)
		s.env.Stats.ConnectedClients.Add(-1)
	}
	if err != nil {
		s.log.Debug("connection closed", "addr", c.RemoteAddr(), "err", err)
	}
}

func (s *Server) handle(c redcon.Conn, cmd redcon.Command) {
	cs := c.Context().(*connState)
	if cs.closed || cs.reg.killed.Load() {
		return
	}
	cs.ctx.Reset()
	cs.writer.Buf = cs.writer.Buf[:0]
	defer s.recoverCommand(c, cs, cmd)
	earlier := cs.conn.DurablePending() // replies already sent wait on it too
	s.table.Dispatch(&cs.ctx, cmd.Args)
	s.awaitDurable(c, cs, earlier)
	s.clients.touch(cs)
	c.WriteRaw(cs.writer.Buf)
	if cs.conn.Authenticated != cs.authed {
		cs.authed = cs.conn.Authenticated
		if cs.guard != nil {
			cs.guard.SetAuthenticated(cs.authed)
		}
	}
	if cs.conn.Close {
		cs.closed = true
		c.Close()
		return
	}
	// redcon flushes once the commands it read so far are answered.
	cs.pending += len(cs.writer.Buf)
	if len(c.PeekPipeline()) == 0 {
		s.countTraffic(cs)
	} else if s.cfg.OutputBufferLimit > 0 && cs.pending > s.cfg.OutputBufferLimit {
		s.log.Warn("closing client over the output buffer limit", "addr", c.RemoteAddr(), "pending", cs.pending)
		cs.closed = true
		c.NetConn().Close()
	}
}

// countTraffic adds a finished pipeline's bytes to the shared counters:
// one atomic add each per pipeline rather than per command.
func (s *Server) countTraffic(cs *connState) {
	s.env.Stats.NetOutputBytes.Add(int64(cs.pending))
	cs.pending = 0
	if cs.guard != nil {
		read := cs.guard.BytesRead()
		s.env.Stats.NetInputBytes.Add(int64(read - cs.counted))
		cs.counted = read
	}
}

// recoverCommand keeps a bug in one command from taking the process (and
// every other client) down: the panic is logged with its stack, the client
// gets an error and its connection is closed, since its state is unknown.
func (s *Server) recoverCommand(c redcon.Conn, cs *connState, cmd redcon.Command) {
	p := recover()
	if p == nil {
		return
	}
	name := ""
	if len(cmd.Args) > 0 {
		name = string(cmd.Args[0])
	}
	s.log.Error("command panicked", "command", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	cs.closed = true
	c.WriteError("ERR internal error running '" + name + "'; the connection is closed")
	c.Close()
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
		for range maxSweepRounds {
			examined, removed := s.env.Keys.Sweep(s.env.Clock.Now(), &cursor, s.cfg.SweepBudget)
			s.env.Stats.ExpiredKeys.Add(int64(removed))
			if removed*4 < examined || examined == 0 {
				break
			}
		}
	}
}
