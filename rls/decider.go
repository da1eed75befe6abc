package rls

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/machine"
)

// Decider runs an RL.SHOULDRATELIMIT and returns its typed result.
type Decider interface {
	// Decide runs args and returns the outcome (an error reply as its
	// Err), or an error when it could not be asked: ErrUnavailable
	// (nothing was logged) or another error (the outcome may be unknown).
	Decide(ctx context.Context, args [][]byte) (machine.Outcome, error)
	// Ready reports whether this node can decide now: a single node, or a
	// member that knows a leader.
	Ready() bool
}

// ErrUnavailable: no node can decide now (no leader known, or it is
// starting); nothing was charged.
var ErrUnavailable = errors.New("rls: no leader to decide")

// ErrOutcomeUnknown: a forwarded call may have reached the leader (the
// connection broke, or the call timed out, after the request was
// written): it may have been charged, so it must not be retried as if
// nothing happened.
var ErrOutcomeUnknown = errors.New("rls: the forwarded call's outcome is unknown")

// notSent marks an error from before a forwarded request could be
// written: the dial to the leader failed.
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// unsent reports a forwarding error after which the leader cannot have
// seen the request: the dial failed, or no connection could be had.
func unsent(err error) bool {
	var ns notSent
	return errors.As(err, &ns) || errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed)
}

// ForwardOptions are how a follower reaches the leader's RESP port.
type ForwardOptions struct {
	// Password is the leader's --requirepass ("" for none).
	Password string
	// TLS, when not nil, dials the leader with it (the RESP port speaks
	// TLS only when --tls-cert-file is set).
	TLS *tls.Config
	// Timeout bounds one forwarded call when the caller set no deadline
	// (default 5 s: longer than a commit may take).
	Timeout time.Duration
}

// NodeDecider decides on this node: through its state machine on a single
// node, through the log on a replicated leader, and by forwarding to the
// leader on a follower.
type NodeDecider struct {
	env     *commands.Env
	node    *cluster.Node
	fwdOpts ForwardOptions

	metrics *Metrics

	sessions sync.Pool
	mu       sync.Mutex
	// fwd are the pipeliners to the nodes calls are forwarded to: this
	// group's leader, and in a sharded cluster the leaders of the groups
	// that own the domains asked about.
	fwd map[string]*pipeliner
}

// NewNodeDecider decides with env's state machine; node is the replicated
// node it is a member of (nil: a single node). Forwarded calls are counted
// in metrics (nil: not counted).
func NewNodeDecider(env *commands.Env, node *cluster.Node, fwd ForwardOptions, metrics *Metrics) *NodeDecider {
	if fwd.Timeout <= 0 {
		fwd.Timeout = 5 * time.Second
	}
	if metrics == nil {
		metrics, _ = NewMetrics(nil)
	}
	d := &NodeDecider{env: env, node: node, fwdOpts: fwd, metrics: metrics, fwd: map[string]*pipeliner{}}
	d.sessions.New = func() any { return env.NewSession("rls") }
	return d
}

// Ready implements Decider.
func (d *NodeDecider) Ready() bool {
	if d.node == nil {
		return true
	}
	return d.node.LiveLeader()
}

// Decide implements Decider. A TRYAGAIN answer (nothing was charged: a
// slot being moved between groups, a group taking its slots) is asked
// again after a short wait, until ctx ends — a Redis Cluster client retries
// it by itself, Envoy does not.
func (d *NodeDecider) Decide(ctx context.Context, args [][]byte) (machine.Outcome, error) {
	wait := time.Millisecond
	for {
		out, err := d.decideOnce(ctx, args)
		if !errors.Is(err, errTryAgain) {
			return out, err
		}
		if _, has := ctx.Deadline(); !has {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d.fwdOpts.Timeout)
			defer cancel()
		}
		select {
		case <-ctx.Done():
			return machine.Outcome{}, ErrUnavailable
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// errTryAgain: the call was answered TRYAGAIN; nothing was charged.
var errTryAgain = errors.New("rls: TRYAGAIN")

func (d *NodeDecider) decideOnce(ctx context.Context, args [][]byte) (machine.Outcome, error) {
	if d.node != nil && !d.node.Serving() {
		return d.forward(ctx, args, "")
	}
	s := d.sessions.Get().(*commands.Session)
	defer d.sessions.Put(s)
	out, err := s.Decide(args)
	if err != nil {
		return machine.Outcome{}, err
	}
	if strings.HasPrefix(out.Err, "TRYAGAIN") && d.node != nil && d.node.Serving() {
		return machine.Outcome{}, errTryAgain
	}
	if redirected(out.Err) {
		// Nothing was logged here: the domain is another group's (MOVED
		// to its leader), or leadership moved between the check and the
		// apply.
		return d.forward(ctx, args, movedTo(out.Err))
	}
	// The statuses are the session's until its next call, and it goes
	// back to the pool on return.
	out.Statuses = slices.Clone(out.Statuses)
	return out, nil
}

// redirected reports an error reply that says nothing was logged on this
// node because another leads (or none does).
func redirected(msg string) bool {
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "TRYAGAIN") || strings.HasPrefix(msg, "CLUSTERDOWN")
}

// movedTo is the address a MOVED reply names ("" for another reply).
func movedTo(msg string) string {
	f := strings.Fields(msg)
	if len(f) == 3 && f[0] == "MOVED" {
		return f[2]
	}
	return ""
}

// maxHops bounds the MOVED replies a forwarded call follows: this group's
// leader, then the domain's group's (a map changing under the call may
// add one).
const maxHops = 3

// forward asks addr ("": this group's leader) over a kept-open RESP
// connection, following a MOVED reply (a sharded cluster's domain owned by
// another group) to the leader it names. It never retries a call that may
// have reached a leader: a retry could charge twice. A call that cannot
// have reached it (the dial failed) goes to this group's next leader if
// one is known by then; otherwise it is ErrUnavailable. Any other failure
// is ErrOutcomeUnknown.
func (d *NodeDecider) forward(ctx context.Context, args [][]byte, addr string) (machine.Outcome, error) {
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.fwdOpts.Timeout)
		defer cancel()
	}
	words := make([]any, len(args))
	for i, a := range args {
		words[i] = a
	}
	tried := ""
	for hops := 0; ; {
		if addr == "" {
			id, leader, ok := d.node.Leader()
			if !ok || leader == "" || id == d.node.Self() || leader == tried || !d.node.LiveLeader() {
				return machine.Outcome{}, ErrUnavailable
			}
			addr = leader
		}
		v, err := d.pipe(addr).send(ctx, words)
		var re redis.Error
		switch {
		case errors.As(err, &re):
			d.metrics.forwarded.WithLabelValues("answered").Inc()
			msg := re.Error()
			if to := movedTo(msg); to != "" && hops < maxHops {
				hops++
				addr = to
				continue
			}
			if strings.HasPrefix(msg, "TRYAGAIN") {
				return machine.Outcome{}, errTryAgain
			}
			if redirected(msg) {
				return machine.Outcome{}, ErrUnavailable
			}
			return machine.Outcome{Err: msg}, nil
		case err != nil && unsent(err):
			d.metrics.forwarded.WithLabelValues("unsent").Inc()
			if tried == addr {
				return machine.Outcome{}, ErrUnavailable
			}
			tried, addr = addr, ""
			continue
		case err != nil:
			d.metrics.forwarded.WithLabelValues("failed").Inc()
			return machine.Outcome{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		}
		d.metrics.forwarded.WithLabelValues("answered").Inc()
		return machine.ReadRLSReply(v)
	}
}

// pipe is the pipeliner to the node at addr, made on first use.
func (d *NodeDecider) pipe(addr string) *pipeliner {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.fwd[addr]; p != nil {
		return p
	}
	cfg := d.fwdOpts.TLS
	if cfg != nil {
		cfg = cfg.Clone()
		if host, _, err := net.SplitHostPort(addr); err == nil && cfg.ServerName == "" {
			cfg.ServerName = host
		}
	}
	// One dial, no retries: a leader that is gone refuses at once, and the
	// call moves to the next leader instead of waiting out go-redis' five
	// dials with backoff (~410 ms). A failed dial is marked notSent.
	dialer := &net.Dialer{Timeout: time.Second, KeepAlive: 5 * time.Minute}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		var err error
		if cfg != nil {
			c, err = (&tls.Dialer{NetDialer: dialer, Config: cfg}).DialContext(ctx, network, addr)
		} else {
			c, err = dialer.DialContext(ctx, network, addr)
		}
		if err != nil {
			return nil, notSent{err}
		}
		return c, nil
	}
	// The nodes a call is forwarded to are the cluster's members, so the
	// pipeliners are few; the connections of nodes no longer leading idle
	// out.
	c := redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, Dialer: dial, DialerRetries: 1,
		MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: d.fwdOpts.Timeout, WriteTimeout: time.Second,
		ContextTimeoutEnabled: true, MinIdleConns: 1, DisableIdentity: true,
		PoolSize: forwardPipelines, ConnMaxIdleTime: time.Minute,
		// A node that turns a connection away (maxclients) answers before
		// it reads anything and closes; a call written on that connection
		// would fail unread, but as a write error, indistinguishable from
		// one lost after it was read. A first round trip (AUTH, or PING
		// without a password) meets the refusal while no call has been
		// sent: whatever it fails with, the calls were not sent.
		OnConnect: func(ctx context.Context, cn *redis.Conn) error {
			var err error
			if pw := d.fwdOpts.Password; pw != "" {
				err = cn.Do(ctx, "AUTH", pw).Err()
			} else {
				err = cn.Ping(ctx).Err()
			}
			if err != nil {
				// go-redis hands the caller this error unwrapped once.
				return fmt.Errorf("rls: the connection's first round trip: %w", notSent{err})
			}
			return nil
		},
	})
	p := newPipeliner(c, d.fwdOpts.Timeout)
	d.fwd[addr] = p
	return p
}

// Close closes the connections calls were forwarded on.
func (d *NodeDecider) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for addr, c := range d.fwd {
		errs = append(errs, c.close())
		delete(d.fwd, addr)
	}
	return errors.Join(errs...)
}
