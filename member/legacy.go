package member

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/memberpb"
	"github.com/sluice-rl/sluice/resp"
)

// A member of 0.4.0 takes placement requests only as Apply: the command's
// words in, the machine's RESP reply out. During a rolling upgrade from
// it, a member of this version sends it those (placeAsApply) and serves
// its Apply calls (service.Apply); nothing else on the member port reads
// or writes RESP. Both go with the release after this one.

// placeAsApply sends req to a member of 0.4.0 as an Apply.
func placeAsApply(ctx context.Context, cc *grpc.ClientConn, to Addr, req *machine.PlacementRequest) (machine.PlacementResult, error) {
	command, err := req.Command()
	if err != nil {
		return machine.PlacementResult{}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	out, err := memberpb.NewMemberClient(cc).Apply(ctx, &memberpb.ApplyRequest{Group: to.Group, Command: command})
	if err != nil {
		return machine.PlacementResult{}, callError(to, err)
	}
	if err := notPlaced(out); err != nil {
		return machine.PlacementResult{}, err
	}
	v, err := resp.DecodeReply(out.GetReply())
	var applied resp.ReplyError
	switch {
	case errors.As(err, &applied):
		// 0.4.0 gives no reason: the request was applied, and refused.
		return machine.PlacementResult{}, &machine.ReplyError{Reason: machine.ReasonInvalid, Reply: string(applied)}
	case err != nil && !errors.Is(err, resp.ErrNull):
		return machine.PlacementResult{}, fmt.Errorf("%w: %s answered what this member cannot read: %w", ErrUnknownOutcome, to.Port, err)
	}
	var res machine.PlacementResult
	switch d := v.(type) {
	case string:
		res.Digest = d
	case []byte:
		res.Digest = string(d)
	}
	return res, nil
}

// Apply serves a member of 0.4.0: the command its words are, logged as a
// Place request is (ServerConfig.Apply), answered with the reply 0.4.0
// reads.
func (v service) Apply(ctx context.Context, in *memberpb.ApplyRequest) (*memberpb.ApplyReply, error) {
	cfg := &v.s.cfg
	if in.GetGroup() != cfg.Group {
		return &memberpb.ApplyReply{Code: memberpb.Code_WRONG_GROUP,
			Detail: fmt.Sprintf("this member is of group %s, not %s", cfg.Group, in.GetGroup())}, nil
	}
	if len(in.GetCommand()) == 0 {
		return &memberpb.ApplyReply{Code: memberpb.Code_REFUSED, Detail: "no command"}, nil
	}
	if cfg.Apply == nil {
		return &memberpb.ApplyReply{Code: memberpb.Code_REFUSED, Detail: "not a command this member takes"}, nil
	}
	reply, leader, err := cfg.Apply(ctx, in.GetCommand())
	var stale *machine.StaleEpochError
	if errors.As(err, &stale) {
		return &memberpb.ApplyReply{Code: memberpb.Code_APPLIED, Refusal: memberpb.Refusal_STALE_EPOCH, Epoch: stale.Epoch,
			Detail: stale.Reply}, nil
	}
	if err != nil {
		code := codeOf(err)
		if code == memberpb.Code_REFUSED {
			cfg.Log.Warn("a member's call was refused", "command", string(in.GetCommand()[0]), "err", err)
		}
		return &memberpb.ApplyReply{Code: code, Detail: err.Error(), Leader: leader}, nil
	}
	return &memberpb.ApplyReply{Code: memberpb.Code_APPLIED, Reply: reply}, nil
}
