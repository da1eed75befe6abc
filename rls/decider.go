package rls

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/member"
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

// Forwarder carries a follower's calls to a leader on its member port
// (member.Client).
type Forwarder interface {
	Decide(ctx context.Context, to member.Addr, command [][]byte) (machine.Outcome, error)
}

// ForwardOptions are how a follower reaches the leader: on its member
// port (package member), never its client door.
type ForwardOptions struct {
	// Members carries the calls; MemberAt says where the member with a
	// client address takes them. Both are needed on a replicated node.
	Members  Forwarder
	MemberAt func(clientAddr string) (member.Addr, bool)
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
	d := &NodeDecider{env: env, node: node, fwdOpts: fwd, metrics: metrics}
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
	if machine.Retryable(out.Refusal) && d.node != nil && d.node.Serving() {
		return machine.Outcome{}, errTryAgain
	}
	if redirected(out.Refusal) {
		// Nothing was logged here: the domain is another group's (MOVED
		// to its leader), or leadership moved between the check and the
		// apply.
		return d.forward(ctx, args, machine.MovedTo(out.Refusal))
	}
	return out, nil
}

// redirected reports a refusal that says nothing was logged on this node
// because another leads (or none does), or not yet.
func redirected(refusal error) bool {
	return errors.Is(refusal, machine.ErrMoved) || machine.Retryable(refusal) || errors.Is(refusal, machine.ErrClusterDown)
}

// maxHops bounds the MOVED replies a forwarded call follows: this group's
// leader, then the domain's group's (a map changing under the call may
// add one).
const maxHops = 3

// forward asks addr ("": this group's leader) on its member port,
// following a not-leader answer or a MOVED (a sharded cluster's domain
// owned by another group) to the leader it names. It never retries a call
// that may have reached a leader: a retry could charge twice. A call that
// cannot have reached it (the member port could not be reached, the
// member did not lead) goes to this group's next leader if one is known by
// then; otherwise it is ErrUnavailable. Any other failure is
// ErrOutcomeUnknown.
func (d *NodeDecider) forward(ctx context.Context, args [][]byte, addr string) (machine.Outcome, error) {
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.fwdOpts.Timeout)
		defer cancel()
	}
	if d.fwdOpts.Members == nil || d.fwdOpts.MemberAt == nil {
		return machine.Outcome{}, ErrUnavailable
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
		to, ok := d.fwdOpts.MemberAt(addr)
		if !ok {
			return machine.Outcome{}, ErrUnavailable
		}
		out, err := d.fwdOpts.Members.Decide(ctx, to, args)
		if leader, ok := member.LeaderOf(err); ok && leader != addr && hops < maxHops {
			d.metrics.forwarded.WithLabelValues("unsent").Inc()
			hops++
			addr = leader
			continue
		}
		switch {
		case err != nil && member.NothingApplied(err):
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
		if to := machine.MovedTo(out.Refusal); to != "" && hops < maxHops {
			hops++
			addr = to
			continue
		}
		if machine.Retryable(out.Refusal) {
			return machine.Outcome{}, errTryAgain
		}
		if redirected(out.Refusal) {
			return machine.Outcome{}, ErrUnavailable
		}
		return out, nil
	}
}

// forwardable reports the commands a follower's gRPC door forwards: Envoy's
// decisions and the RLQS shares (and leases, from a member before shares).
func forwardable(name string) bool {
	return strings.EqualFold(name, "rl.shouldratelimit") || strings.EqualFold(name, "rl.share") || strings.EqualFold(name, "rl.lease")
}

// DecideAllHere runs the RL.SHOULDRATELIMIT, RL.SHARE and RL.LEASE calls a follower forwarded, on
// this node as its group's leader (member.DecideFunc), as one batch (one
// log group): never forwarded again from here — a node that does not
// lead says who does (member.ErrNotLeader) and logs nothing.
func (d *NodeDecider) DecideAllHere(_ context.Context, cmds [][][]byte) ([]machine.Outcome, string, error) {
	for _, args := range cmds {
		if len(args) == 0 || !forwardable(string(args[0])) {
			return nil, "", fmt.Errorf("%w: only RL.SHOULDRATELIMIT, RL.SHARE and RL.LEASE are forwarded", member.ErrRefused)
		}
	}
	if d.node != nil && !d.node.Serving() {
		_, leader, _ := d.node.Leader()
		return nil, leader, member.ErrNotLeader
	}
	s := d.sessions.Get().(*commands.Session)
	defer d.sessions.Put(s)
	outs, err := s.DecideAll(cmds)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", member.ErrUnknownOutcome, err)
	}
	return outs, "", nil
}
