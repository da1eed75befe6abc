package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/server/guard"
)

// connState is what the server keeps per connection. Only its event loop
// touches it, or the goroutine it handed the connection to, except reg
// (see connReg) and out's writer goroutine (see output).
type connState struct {
	ctx    commands.Ctx
	conn   commands.Conn
	writer commands.Writer
	nc     net.Conn
	// framer parses the requests; it learns when AUTH succeeds so the
	// pre-AUTH limits stop applying.
	framer *guard.Framer
	authed bool
	out    output
	// closing ends the connection once the replies so far are sent.
	closing bool
	// inBytes counts bytes read since they were last added to the shared
	// input counter.
	inBytes int
	// reg is what CLIENT LIST and CLIENT KILL read from other connections.
	reg connReg
	// batchCommands counts the commands of the batch being answered.
	batchCommands int
	// dropped is set once a publisher dropped this subscriber.
	dropped atomic.Bool
	// mark is when the command about to run started (monotonic ns since
	// the server started): the read that ends one command starts the next.
	mark int64

	// The event loop's (loop_linux.go): fc is the socket and fd its
	// descriptor; rd is what requests are read from (fc, or TLS over
	// it, then tls is set); loop is the connection's loop, away says a
	// goroutine has the connection (handOff); lastIO is when bytes last
	// came in, or a handed-off batch ended (monotonic ns).
	fc     *fdConn
	fd     int
	rd     io.Reader
	tls    *tls.Conn
	loop   *eventLoop
	away   bool
	lastIO int64
	// revisiting says the connection is on its loop's revisit list.
	revisiting bool
	// connected is when the connection was let in (monotonic ns).
	connected int64
}

// refusal is the reply that turns a new connection away, or "": protected
// mode, then maxclients. A connection that is let in counts as connected.
func (s *Server) refusal(nc net.Conn) string {
	if s.cfg.ProtectedMode && s.cfg.RequirePass == "" && !isLoopback(nc.RemoteAddr()) {
		return protectedModeReply
	}
	st := s.env.Stats
	if st.ConnectedClients.Add(1) > s.env.Tunables.MaxClients.Load() {
		st.ConnectedClients.Add(-1)
		return maxClientsReply
	}
	return ""
}

const maxClientsReply = "-ERR max number of clients reached\r\n"

// refuse sends a refused client its reason and closes the connection,
// giving a client that does not read a bounded time.
func refuse(nc net.Conn, reply string) {
	nc.SetWriteDeadline(time.Now().Add(finalWriteTimeout))
	nc.Write([]byte(reply))
	closeAfterReply(nc)
}

// closeAfterReply sends FIN after the last reply before closing, so the
// reply is not lost to the reset that closing with unread input sends.
func closeAfterReply(nc net.Conn) {
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	nc.Close()
}

func (s *Server) newConn(nc net.Conn) *connState {
	cs := &connState{nc: nc}
	cs.conn = commands.Conn{
		ID:            s.nextID.Add(1),
		Addr:          nc.RemoteAddr().String(),
		LocalAddr:     nc.LocalAddr().String(),
		Proto:         2,
		Authenticated: s.cfg.RequirePass == "",
		Created:       s.env.Clock.Now(),
	}
	cs.writer.Proto = 2
	cs.ctx = commands.Ctx{Env: s.env, Conn: &cs.conn, W: &cs.writer}
	cs.authed = cs.conn.Authenticated
	// Config.Validate checked the limits.
	cs.framer, _ = guard.NewFramer(s.cfg.Protocol, cs.authed)
	cs.out.init(nc, &s.clientBytes)
	cs.conn.Sink = pushSink{s: s, cs: cs}
	return cs
}

// pushSink delivers pub/sub messages to a connection from the publisher's
// goroutine: queued on its output without blocking; a subscriber whose
// unsent output passes the pub/sub limit is dropped (its connection
// closed), as Redis' client-output-buffer-limit pubsub does.
type pushSink struct {
	s  *Server
	cs *connState
}

func (p pushSink) Push(msg []byte) bool {
	limit := p.s.cfg.PubSubOutputLimit
	if limit > 0 && p.cs.out.queuedBytes()+len(msg) > limit {
		if p.cs.dropped.CompareAndSwap(false, true) {
			p.s.log.Warn("dropping a pub/sub subscriber over its output limit", "addr", p.cs.conn.Addr,
				"queued", p.cs.out.queuedBytes())
			p.cs.out.abandon()
		}
		return false
	}
	if p.s.clientBytes.Load() > p.s.env.MaxMemoryClients() {
		p.s.evictOverBudget()
	}
	return p.cs.out.send(msg) == nil
}

func (s *Server) closeConn(cs *connState) {
	if cs.conn.Sub != nil {
		s.env.PubSub.Drop(cs.conn.Sub)
	}
	s.clients.remove(cs)
	s.leftUnauthenticated(cs)
	cs.nc.Close()
	cs.out.wait() // the writer goroutine, if any, fails on the closed socket
	cs.out.release()
	s.releaseRequestBuffer(cs)
	s.countInput(cs)
}

// runBatch runs every complete request the buffer holds, appending the
// replies to cs.writer.Buf. With onLoop it stops before a request that
// would block (Ctx.WouldWait) and returns it, not yet run.
func (s *Server) runBatch(cs *connState, onLoop bool) (pending [][]byte) {
	cs.mark = s.monotonic()
	for !cs.closing {
		args, err := cs.framer.Next()
		if err != nil {
			s.protocolError(cs, err)
			return nil
		}
		if args == nil {
			return nil
		}
		if cs.reg.killed.Load() {
			cs.closing = true
			return nil
		}
		cmd := s.table.Lookup(args[0])
		if onLoop && cs.ctx.WouldWait(cmd) {
			return args
		}
		s.runOne(cs, cmd, args)
		if len(cs.writer.Buf) >= replyKeepCap && !cs.closing {
			s.sendEarly(cs)
		}
	}
	return nil
}

// sendEarly sends a long batch's replies so far, when nothing before them
// waits (no machine command to settle, no change to make durable): a
// pipeline of large replies then never builds one buffer of them all, and
// what the client does not read is counted as queued (maxmemory-clients).
func (s *Server) sendEarly(cs *connState) {
	if cs.ctx.Unsettled() || cs.conn.DurablePending() {
		return
	}
	s.env.Stats.NetOutputBytes.Add(int64(len(cs.writer.Buf)))
	if err := cs.out.send(cs.writer.Buf); err != nil {
		cs.closing = true
	}
	cs.writer.Buf = cs.writer.Buf[:0]
}

// runOne runs one request (cmd is its command, nil when unknown) and
// applies what it changed of the connection.
func (s *Server) runOne(cs *connState, cmd *commands.Command, args [][]byte) {
	s.run(cs, cmd, args)
	if cs.conn.Authenticated != cs.authed {
		cs.authed = cs.conn.Authenticated
		cs.framer.SetAuthenticated(cs.authed)
		s.authChanged(cs)
	}
	switch {
	case cs.conn.Close:
		cs.closing = true
	case s.overOutputLimit(cs):
		s.log.Warn("closing client over the output buffer limit", "addr", cs.conn.Addr,
			"queued", cs.out.queuedBytes()+len(cs.writer.Buf))
		s.dropReplies(cs)
	case s.overClientBudget(cs) && s.closeLargestClient(cs):
		s.dropReplies(cs)
	}
}

// dropReplies closes a connection over a memory limit: the replies built
// and queued are dropped.
func (s *Server) dropReplies(cs *connState) {
	cs.closing = true
	cs.writer.Buf = nil
	cs.out.abandon()
}

// overOutputLimit reports whether the connection's unsent replies, those
// of this batch and those queued from earlier ones, pass the limit, as
// Redis counts a client's output buffer.
func (s *Server) overOutputLimit(cs *connState) bool {
	limit := s.cfg.OutputBufferLimit
	return limit > 0 && len(cs.writer.Buf)+cs.out.queuedBytes() > limit
}

// run dispatches one command.
func (s *Server) run(cs *connState, cmd *commands.Command, args [][]byte) {
	cs.batchCommands++
	defer s.recoverCommand(cs, args)
	cs.ctx.Reset()
	start := len(cs.writer.Buf)
	s.table.DispatchCommand(&cs.ctx, cmd, args)
	end := s.monotonic()
	if cmd := cs.ctx.Command(); cmd != nil {
		cmd.Observe(end-cs.mark, len(cs.writer.Buf) > start && cs.writer.Buf[start] == '-')
	}
	cs.mark = end
	s.clients.touch(cs)
}

// monotonic is the time since the server started, from the monotonic
// clock (never the test clock DEBUG CLOCK sets).
func (s *Server) monotonic() int64 { return int64(time.Since(s.born)) }

// settle applies the machine commands the batch queued (a replicated
// node's), recovering like run from a bug in them.
func (s *Server) settle(cs *connState) {
	defer s.recoverCommand(cs, nil)
	cs.ctx.Settle()
}

// protocolError answers a violation as Redis does: the replies to the
// requests before it, then "-ERR Protocol error: <reason>", then close.
func (s *Server) protocolError(cs *connState, err error) {
	cs.writer.Buf = guard.AppendReply(cs.writer.Buf, err)
	cs.closing = true
	s.log.Debug("protocol violation", "addr", cs.conn.Addr, "err", err)
}

// flush sends the batch's replies, once the changes they report are
// durable.
func (s *Server) flush(cs *connState) {
	// A replicated node applies the batch's machine commands now, all in
	// one group of one log entry, and puts their replies in place.
	s.settle(cs)
	if !s.awaitDurable(cs) {
		cs.closing = true
		cs.writer.Buf = cs.writer.Buf[:0]
		return
	}
	cs.batchCommands = 0
	s.env.Stats.NetOutputBytes.Add(int64(len(cs.writer.Buf)))
	s.countInput(cs)
	if len(cs.writer.Buf) > 0 {
		if err := cs.out.send(cs.writer.Buf); err != nil {
			cs.closing = true
		}
		cs.writer.Buf = cs.writer.Buf[:0]
		if cap(cs.writer.Buf) > replyKeepCap {
			cs.writer.Buf = nil // a large batch's replies: do not pin them
		}
	}
	if cs.closing {
		cs.out.finish(finalWriteTimeout)
		closeAfterReply(cs.nc)
	}
}

const (
	// replyKeepCap is the largest reply buffer kept between batches.
	replyKeepCap = 64 * 1024
	// finalWriteTimeout bounds how long a closing connection may take to
	// receive its last replies.
	finalWriteTimeout = 10 * time.Second
)

// countInput adds the bytes read since the last batch to the shared
// counter: one atomic add per batch rather than per command.
func (s *Server) countInput(cs *connState) {
	if cs.inBytes > 0 {
		s.env.Stats.NetInputBytes.Add(int64(cs.inBytes))
		cs.inBytes = 0
	}
}

// recoverCommand keeps a bug in one command from taking the process (and
// every other client) down: the panic is logged with its stack, the client
// gets an error and its connection is closed, since its state is unknown.
func (s *Server) recoverCommand(cs *connState, args [][]byte) {
	p := recover()
	if p == nil {
		return
	}
	name := ""
	if len(args) > 0 {
		name = string(args[0])
	}
	s.log.Error("command panicked", "command", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	cs.closing = true
	cs.writer.Error("ERR internal error running '" + name + "'; the connection is closed")
}
