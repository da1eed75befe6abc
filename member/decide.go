package member

import (
	"context"
	"fmt"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/memberpb"
)

// DecideFunc runs a client's RL.SHOULDRATELIMIT that a follower's door
// took, here, as the group's leader: its outcome (an error reply as its
// Err: a MOVED to the domain's group, TRYAGAIN), or an error wrapping one
// of the package's sentinels (ErrNotLeader with the leader's client
// address; nothing was logged).
type DecideFunc func(ctx context.Context, command [][]byte) (out machine.Outcome, leader string, err error)

func (v service) Decide(ctx context.Context, in *memberpb.DecideRequest) (*memberpb.DecideReply, error) {
	cfg := &v.s.cfg
	if in.GetGroup() != cfg.Group {
		return &memberpb.DecideReply{Code: memberpb.Code_WRONG_GROUP,
			Detail: fmt.Sprintf("this member is of group %s, not %s", cfg.Group, in.GetGroup())}, nil
	}
	if cfg.Decide == nil || len(in.GetCommand()) == 0 {
		return &memberpb.DecideReply{Code: memberpb.Code_REFUSED, Detail: "not a decision this member takes"}, nil
	}
	out, leader, err := cfg.Decide(ctx, in.GetCommand())
	if err != nil {
		return &memberpb.DecideReply{Code: codeOf(err), Detail: err.Error(), Leader: leader}, nil
	}
	return &memberpb.DecideReply{Code: memberpb.Code_APPLIED, Error: out.Err, Limited: out.Limited, Statuses: statusMessages(out.Statuses)}, nil
}

// Decide asks the member at to, its group's leader, to run a client's
// RL.SHOULDRATELIMIT: its outcome, or an error wrapping the package's
// sentinels (ErrUnreachable and ErrNotLeader: nothing was logged).
func (c *Client) Decide(ctx context.Context, to Addr, command [][]byte) (machine.Outcome, error) {
	cc, err := c.conn(to)
	if err != nil {
		return machine.Outcome{}, err
	}
	if err := ready(ctx, cc); err != nil {
		return machine.Outcome{}, fmt.Errorf("%w: %s: %w", ErrUnreachable, to.Port, err)
	}
	out, err := memberpb.NewMemberClient(cc).Decide(ctx, &memberpb.DecideRequest{Group: to.Group, Command: command})
	if err != nil {
		return machine.Outcome{}, callError(to, err)
	}
	if out.GetCode() == memberpb.Code_NOT_LEADER {
		return machine.Outcome{}, &NotLeaderError{Leader: out.GetLeader(), Detail: out.GetDetail()}
	}
	if err := errOf(out.GetCode()); err != nil {
		return machine.Outcome{}, fmt.Errorf("%w (%s)", err, out.GetDetail())
	}
	return machine.Outcome{Err: out.GetError(), Limited: out.GetLimited(), Statuses: statusesOf(out.GetStatuses())}, nil
}
