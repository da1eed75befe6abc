package rls

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Guard bounds what a gRPC caller can hold before it has sent a request
// message. grpc-go creates a stream, and a goroutine waiting for its body,
// for every HEADERS frame it accepts: without a guard one connection
// opening streams that never send a body held 150,000 goroutines (1.8 GB),
// before any password was looked at. The guard, run by the transport on
// each new stream's headers (grpc.InTapHandle):
//   - refuses a call to a method that needs the password when its
//     authorization header lacks it (UNAUTHENTICATED): no stream, no
//     goroutine, nothing read;
//   - refuses a stream past the budget of streams still waiting for their
//     request message, all connections together (RESOURCE_EXHAUSTED);
//   - gives each stream BodyTimeout to send its first message: past it
//     the stream's connection is closed (CloseConn), which ends every
//     stream on it — a client that sends headers and no body is cut.
//
// A call costs the guard an atomic count, a small record and a context
// value: a timer and a cancellable context per call cost the door 7% of
// its calls/s (scripts/bench_budgets.sh), so overdue streams are found by
// a sweep every BodyTimeout/4 instead.
//
// Streams per connection and the header list's size are capped by the
// server's options beside it (see ServerOptions).
type Guard struct {
	cfg GuardConfig
	// waiting counts the streams accepted and still waiting for their
	// first message: [0] the rate limit services', [1] the others' (health,
	// reflection, open to callers without the password), so streams that
	// need no password cannot crowd out those that carry it.
	waiting [2]atomic.Int64
	// refused counts the streams the guard turned away; overdue those
	// that sent no message in time.
	refused, overdue atomic.Int64

	// mu guards waits: the streams accepted since the last sweep, and
	// those still waiting before it.
	mu    sync.Mutex
	waits []*bodyWait
	stop  chan struct{}
	done  chan struct{}
}

// GuardConfig configures a Guard.
type GuardConfig struct {
	// Password, when set, is what calls to the rate limit services must
	// carry ("authorization: Bearer <password>"); health and reflection
	// stay open, as the probes that call them carry none.
	Password string
	// BodyTimeout is how long a stream may take, after its headers, to
	// send its request message (default 10 s).
	BodyTimeout time.Duration
	// MaxWaiting is the most streams waiting for their request message at
	// once, all connections together (default 1024), for the rate limit
	// services and, apart, for the rest (health, reflection).
	MaxWaiting int
	// MaxStreams is the most concurrent streams on one connection
	// (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; default 1024).
	MaxStreams uint32
	// MaxHeaderBytes bounds a request's header list (default 16 KiB;
	// Envoy sends a few hundred bytes).
	MaxHeaderBytes uint32
	// CloseConn closes the connection a peer address names (the door's
	// listener knows them); nil: overdue streams are only counted.
	CloseConn func(remote net.Addr) bool
	// CallBegins, when set, counts a call on its connection and returns
	// what to tell when the call ends (nil: not tracked), so the door
	// never closes a connection with a call being decided or answered;
	// closing refuses the call (UNAVAILABLE: nothing done) on a
	// connection being closed for a newer one.
	CallBegins func(remote net.Addr) (call Call, closing bool)
	// MaxMessageBytes bounds a request message (default 2 MiB: the
	// largest request the request limits allow, 256 entries of a 1 KiB key
	// and a 4 KiB value, is 1.3 MB; grpc-go's own default is 4 MiB).
	MaxMessageBytes int
}

func (c GuardConfig) withDefaults() GuardConfig {
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = 10 * time.Second
	}
	if c.MaxWaiting <= 0 {
		c.MaxWaiting = 1024
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = 1024
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = 16 << 10
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 2 << 20
	}
	return c
}

// Call is a call counted on its connection (GuardConfig.CallBegins).
type Call interface {
	// End says the call's handler returned.
	End()
}

// NewGuard returns a guard with cfg's zero fields defaulted; Close stops
// its sweep.
func NewGuard(cfg GuardConfig) *Guard {
	g := &Guard{cfg: cfg.withDefaults(), stop: make(chan struct{}), done: make(chan struct{})}
	go g.sweepEvery(max(g.cfg.BodyTimeout/4, 10*time.Millisecond))
	return g
}

// Close stops the sweep.
func (g *Guard) Close() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
}

func (g *Guard) sweepEvery(d time.Duration) {
	defer close(g.done)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case now := <-t.C:
			g.sweep(now.UnixNano())
		}
	}
}

// sweep forgets the streams whose message came and cuts the connections of
// those waiting past the timeout.
func (g *Guard) sweep(now int64) {
	var overdue []*bodyWait
	g.mu.Lock()
	kept := g.waits[:0]
	for _, w := range g.waits {
		switch {
		case w.done.Load():
		case now-w.start >= int64(g.cfg.BodyTimeout):
			overdue = append(overdue, w)
		default:
			kept = append(kept, w)
		}
	}
	clear(g.waits[len(kept):])
	g.waits = kept
	g.mu.Unlock()
	for _, w := range overdue {
		if w.done.CompareAndSwap(false, true) {
			w.waiting.Add(-1)
			w.ended()
			g.overdue.Add(1)
			if g.cfg.CloseConn != nil && w.remote != nil {
				g.cfg.CloseConn(w.remote)
			}
		}
	}
}

// ServerOptions are the grpc.Server options that install the guard.
func (g *Guard) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(g.cfg.MaxStreams),
		grpc.MaxHeaderListSize(g.cfg.MaxHeaderBytes),
		grpc.MaxRecvMsgSize(g.cfg.MaxMessageBytes),
		grpc.InTapHandle(g.tap),
		grpc.ChainUnaryInterceptor(g.unary),
		grpc.ChainStreamInterceptor(g.stream),
	}
}

// Waiting is how many streams wait for their request message now.
func (g *Guard) Waiting() int64 { return g.waiting[0].Load() + g.waiting[1].Load() }

// Refused is how many streams the guard has turned away; Overdue how many
// waited past the timeout.
func (g *Guard) Refused() int64 { return g.refused.Load() }
func (g *Guard) Overdue() int64 { return g.overdue.Load() }

// needsPassword reports the methods the password guards: the rate limit
// services'. Health and reflection answer probes that carry no token.
func needsPassword(method string) bool {
	return strings.HasPrefix(method, "/envoy.service.")
}

var (
	errGuardUnauthenticated = status.Error(codes.Unauthenticated, "sluice: this rate limit service needs authorization: Bearer <password>")
	errGuardBusy            = status.Error(codes.ResourceExhausted, "sluice: too many calls waiting for their request; try again")
	errGuardClosing         = status.Error(codes.Unavailable, "sluice: this connection is being closed for a newer one; call again")
)

// tap runs on the transport's goroutine for each new stream, before the
// stream exists: it must be quick and must not block.
func (g *Guard) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	class := 1
	if needsPassword(info.FullMethodName) {
		class = 0
	}
	if g.cfg.Password != "" && class == 0 {
		var auth string
		if v := info.Header.Get("authorization"); len(v) > 0 {
			auth = v[0]
		}
		if !bearerMatches(g.cfg.Password, auth) {
			g.refused.Add(1)
			return nil, errGuardUnauthenticated
		}
	}
	waiting := &g.waiting[class]
	if waiting.Add(1) > int64(g.cfg.MaxWaiting) {
		waiting.Add(-1)
		g.refused.Add(1)
		return nil, errGuardBusy
	}
	w := &bodyWait{waiting: waiting, start: time.Now().UnixNano()}
	if p, ok := peer.FromContext(ctx); ok {
		w.remote = p.Addr
	}
	if g.cfg.CallBegins != nil && w.remote != nil {
		var closing bool
		if w.call, closing = g.cfg.CallBegins(w.remote); closing {
			waiting.Add(-1)
			g.refused.Add(1)
			return nil, errGuardClosing
		}
	}
	g.mu.Lock()
	g.waits = append(g.waits, w)
	g.mu.Unlock()
	return context.WithValue(ctx, bodyWaitKey{}, w), nil
}

// bodyWait is one stream's wait for its request message: it ends once, by
// the message arriving (arrived) or the sweep finding it overdue.
type bodyWait struct {
	// waiting is the count the stream is in.
	waiting *atomic.Int64
	// start is when its headers came (Unix ns); remote its peer.
	start  int64
	remote net.Addr
	// call is the call as its connection counts it (nil: not tracked),
	// ended when the handler returns or the call is found overdue.
	call Call
	done atomic.Bool
}

type bodyWaitKey struct{}

// arrived ends the wait; false if the sweep ended it first.
func (w *bodyWait) arrived() bool {
	if w.done.CompareAndSwap(false, true) {
		w.waiting.Add(-1)
		return true
	}
	return false
}

// ended takes the call off its connection's count.
func (w *bodyWait) ended() {
	if w.call != nil {
		w.call.End()
	}
}

func waitOf(ctx context.Context) *bodyWait {
	w, _ := ctx.Value(bodyWaitKey{}).(*bodyWait)
	return w
}

// unary runs once a unary call's request message has been read: the wait
// is over.
func (g *Guard) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if w := waitOf(ctx); w != nil && w.arrived() {
		defer w.ended()
	}
	return h(ctx, req)
}

// stream runs before a streaming call reads anything: its wait ends with
// its first message.
func (g *Guard) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	w := waitOf(ss.Context())
	if w == nil {
		return h(srv, ss)
	}
	defer func() {
		if w.arrived() { // the call ended without a message
			w.ended()
		}
	}()
	f := &firstMessage{ServerStream: ss, w: w}
	defer f.end()
	return h(srv, f)
}

// firstMessage ends its stream's body wait when the first message arrives.
type firstMessage struct {
	grpc.ServerStream
	w *bodyWait
	// counted: the first message came, the call is in flight.
	counted bool
}

func (f *firstMessage) RecvMsg(m any) error {
	err := f.ServerStream.RecvMsg(m)
	if err == nil && f.w.arrived() {
		f.counted = true
	}
	return err
}

// end takes a streaming call that got its first message off its
// connection's count.
func (f *firstMessage) end() {
	if f.counted {
		f.w.ended()
	}
}
