package member

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/memberpb"
)

// DecideFunc runs clients' RL.SHOULDRATELIMIT calls that a follower's
// doors took, here, as the group's leader, together (one log group): each
// call's outcome, in order (an error reply as its Err: a MOVED to the
// domain's group, TRYAGAIN), or an error for them all wrapping one of the
// package's sentinels (ErrNotLeader with the leader's client address:
// nothing was logged).
type DecideFunc func(ctx context.Context, commands [][][]byte) (outs []machine.Outcome, leader string, err error)

func (v service) DecideBatch(ctx context.Context, in *memberpb.DecideBatchRequest) (*memberpb.DecideBatchReply, error) {
	cfg := &v.s.cfg
	if in.GetGroup() != cfg.Group {
		return &memberpb.DecideBatchReply{Code: memberpb.Code_WRONG_GROUP,
			Detail: fmt.Sprintf("this member is of group %s, not %s", cfg.Group, in.GetGroup())}, nil
	}
	if cfg.Decide == nil {
		return &memberpb.DecideBatchReply{Code: memberpb.Code_REFUSED, Detail: "not a decision this member takes"}, nil
	}
	cmds := make([][][]byte, len(in.GetCalls()))
	for i, call := range in.GetCalls() {
		if len(call.GetWords()) == 0 {
			return &memberpb.DecideBatchReply{Code: memberpb.Code_REFUSED, Detail: "a call with no command"}, nil
		}
		cmds[i] = call.GetWords()
	}
	outs, leader, err := cfg.Decide(ctx, cmds)
	if err != nil {
		return &memberpb.DecideBatchReply{Code: codeOf(err), Detail: err.Error(), Leader: leader}, nil
	}
	replies := make([]*memberpb.DecideReply, len(outs))
	for i := range outs {
		o := &outs[i]
		replies[i] = &memberpb.DecideReply{Code: memberpb.Code_APPLIED, Error: o.Err, Reason: reasonOnWire(o.Reason), Limited: o.Limited,
			Statuses: statusMessages(o.Statuses)}
		if o.Leased {
			l := &o.Lease
			replies[i].Lease = &memberpb.LeaseResult{Granted: l.Granted, TtlNs: l.TTL, RefreshNs: l.Refresh, Unlimited: l.Unlimited, Denied: l.Denied, GrantId: l.Grant}
		}
		if o.Shared {
			sh := &o.Share
			replies[i].Share = &memberpb.ShareResult{Burst: sh.Burst, PerFill: sh.PerFill, EveryS: sh.Every, TtlNs: sh.TTL, Gen: sh.Gen,
				Unlimited: sh.Unlimited, Denied: sh.Denied}
		}
		setRedirect(replies[i], o.Refusal)
	}
	return &memberpb.DecideBatchReply{Code: memberpb.Code_APPLIED, Replies: replies}, nil
}

// redirectKinds are the redirects' codes on the wire.
var redirectKinds = []struct {
	code memberpb.Refusal
	kind error
}{{memberpb.Refusal_MOVED, machine.ErrMoved}, {memberpb.Refusal_TRY_AGAIN, machine.ErrTryAgain},
	{memberpb.Refusal_CLUSTER_DOWN, machine.ErrClusterDown}, {memberpb.Refusal_FENCED, machine.ErrFenced}}

// setRedirect puts a call's refusal (a *machine.Redirect, ErrFenced) on
// the wire.
func setRedirect(m *memberpb.DecideReply, refusal error) {
	if refusal == nil {
		return
	}
	for _, k := range redirectKinds {
		if errors.Is(refusal, k.kind) {
			m.Refusal = k.code
			break
		}
	}
	var to *machine.Redirect
	if errors.As(refusal, &to) && to.Kind == machine.ErrMoved {
		m.MovedSlot, m.MovedTo = int32(to.Slot), to.Addr
	}
}

// redirectOf reads a call's refusal off the wire (nil: none): a
// *machine.Redirect whose Reply is the error reply, or ErrFenced's.
func redirectOf(m *memberpb.DecideReply) error {
	for _, k := range redirectKinds {
		if m.GetRefusal() != k.code {
			continue
		}
		if k.kind == machine.ErrFenced {
			return &machine.PartError{Kind: machine.ErrFenced, Reply: m.GetError()}
		}
		return &machine.Redirect{Kind: k.kind, Slot: int(m.GetMovedSlot()), Addr: m.GetMovedTo(), Reply: m.GetError()}
	}
	return nil
}
