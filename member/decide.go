package member

import (
	"context"
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
		replies[i] = &memberpb.DecideReply{Code: memberpb.Code_APPLIED, Error: o.Err, Limited: o.Limited, Statuses: statusMessages(o.Statuses)}
	}
	return &memberpb.DecideBatchReply{Code: memberpb.Code_APPLIED, Replies: replies}, nil
}
