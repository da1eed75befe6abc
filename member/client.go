package member

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/memberpb"
	"github.com/sluice-rl/sluice/raftmux"
)

// Addr is where a member's calls go: its member port and its group.
type Addr struct {
	// Port is the member port's address (its Raft address, or the one
	// --raft-dial-via gives).
	Port string
	// Group is the member's group id.
	Group string
}

// ClientConfig is what a member's client needs.
type ClientConfig struct {
	// Secret is the cluster's (--cluster-secret-file; nil: none).
	Secret []byte
	// TLS, when set, encrypts the calls (the member ports speak TLS:
	// --tls-cert-file).
	TLS *tls.Config
	// IdleAfter is how long a member may go uncalled before its
	// connection and batcher are closed (0: DefaultIdleAfter): a member
	// removed from the cluster, or one whose address changed, is not kept
	// for the life of the process. One called again is dialed again.
	IdleAfter time.Duration
	// Now is the clock idleness is measured by (nil: time.Now).
	Now func() time.Time
}

// DefaultIdleAfter is ClientConfig.IdleAfter's default: far longer than
// any call, and than the gaps between a leader's reports to its members.
const DefaultIdleAfter = 2 * time.Minute

// Client calls other members, keeping one connection to each it called
// lately.
type Client struct {
	cfg      ClientConfig
	mu       sync.Mutex
	conns    map[Addr]*grpc.ClientConn
	batchers map[Addr]*batcher
	// used is when each member was last called; swept, when idle ones
	// were last looked for.
	used  map[Addr]time.Time
	swept time.Time
	// closing counts the idle members being closed (Close waits).
	closing sync.WaitGroup
}

// NewClient makes a client.
func NewClient(cfg ClientConfig) *Client {
	if cfg.IdleAfter <= 0 {
		cfg.IdleAfter = DefaultIdleAfter
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{cfg: cfg, conns: map[Addr]*grpc.ClientConn{}, batchers: map[Addr]*batcher{}, used: map[Addr]time.Time{}}
}

// touch notes a call to to, and closes the members not called for
// IdleAfter (looked for at most twice per IdleAfter). c.mu is held.
func (c *Client) touch(to Addr) {
	now := c.cfg.Now()
	c.used[to] = now
	if now.Sub(c.swept) < c.cfg.IdleAfter/2 {
		return
	}
	c.swept = now
	var conns []*grpc.ClientConn
	var batchers []*batcher
	for a, at := range c.used {
		if now.Sub(at) < c.cfg.IdleAfter {
			continue
		}
		if cc := c.conns[a]; cc != nil {
			conns = append(conns, cc)
		}
		if b := c.batchers[a]; b != nil {
			batchers = append(batchers, b)
		}
		delete(c.conns, a)
		delete(c.batchers, a)
		delete(c.used, a)
	}
	if len(conns)+len(batchers) == 0 {
		return
	}
	c.closing.Add(1)
	go func() {
		defer c.closing.Done()
		for _, b := range batchers {
			b.close()
		}
		for _, cc := range conns {
			cc.Close()
		}
	}()
}

// conn is the connection to to, made on first use.
func (c *Client) conn(to Addr) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.touch(to)
	if cc := c.conns[to]; cc != nil {
		return cc, nil
	}
	guard := raftmux.Guard{Secret: c.cfg.Secret, ClientTLS: c.cfg.TLS}
	cc, err := grpc.NewClient("passthrough:///"+to.Port,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return raftmux.DialMember(ctx, addr, to.Group, guard)
		}),
		// A member that restarts is back within a second or two: look
		// again soon, not after gRPC's default minutes.
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: time.Second,
			Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage)))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, to.Port, err)
	}
	c.conns[to] = cc
	return cc, nil
}

// Report asks the member at to what it knows of its group.
func (c *Client) Report(ctx context.Context, to Addr) (Report, error) {
	cc, err := c.conn(to)
	if err != nil {
		return Report{}, err
	}
	if err := ready(ctx, cc); err != nil {
		return Report{}, fmt.Errorf("%w: %s: %w", ErrUnreachable, to.Port, err)
	}
	out, err := memberpb.NewMemberClient(cc).Report(ctx, &memberpb.ReportRequest{Group: to.Group})
	if err != nil {
		return Report{}, callError(to, err)
	}
	if err := errOf(out.GetCode()); err != nil {
		return Report{}, fmt.Errorf("%w: %s, asked for group %s", err, to.Port, to.Group)
	}
	return reportOf(out), nil
}

// NotLeaderError is ErrNotLeader with the leader the member knows.
type NotLeaderError struct {
	// Leader is the client address of the group's leader the member
	// knows ("" for none).
	Leader, Detail string
}

func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return ErrNotLeader.Error() + " (no leader known)"
	}
	return ErrNotLeader.Error() + " (the leader is " + e.Leader + ")"
}

func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// LeaderOf is the leader's client address a not-leader answer named.
func LeaderOf(err error) (string, bool) {
	var nl *NotLeaderError
	if errors.As(err, &nl) && nl.Leader != "" {
		return nl.Leader, true
	}
	return "", false
}

// ready waits until cc is connected: a call is only sent on a connection
// that is up, so one that cannot be made is known not to have been sent.
func ready(ctx context.Context, cc *grpc.ClientConn) error {
	for {
		switch st := cc.GetState(); st {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			cc.Connect()
			return fmt.Errorf("connection %s", st)
		default:
			cc.Connect()
			if !cc.WaitForStateChange(ctx, st) {
				return ctx.Err()
			}
		}
	}
}

// callError is what a failed call on a connection that was up says: the
// member refused it (a message over the size), or its outcome is unknown
// (the connection was lost, the deadline passed: it may have applied).
func callError(to Addr, err error) error {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.ResourceExhausted, codes.Unimplemented, codes.InvalidArgument:
		return fmt.Errorf("%w: %s: %s", ErrRefused, to.Port, st.Message())
	}
	return fmt.Errorf("%w: %s: %s", ErrUnknownOutcome, to.Port, st.Message())
}

// Close stops the batches and closes every connection. The batches go
// first: those in flight still use their connections.
func (c *Client) Close() error {
	c.mu.Lock()
	batchers := c.batchers
	c.batchers = map[Addr]*batcher{}
	c.mu.Unlock()
	for _, b := range batchers {
		b.close()
	}
	c.mu.Lock()
	conns := c.conns
	c.conns, c.used = map[Addr]*grpc.ClientConn{}, map[Addr]time.Time{}
	c.mu.Unlock()
	for _, cc := range conns {
		cc.Close()
	}
	c.closing.Wait()
	return nil
}
