package member

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/memberpb"
)

// PlaceFunc logs a placement request for a member that asked, through the
// group's log: its result, or an error wrapping one of the package's
// sentinels (ErrNotLeader with the leader's client address, ErrRefused,
// ErrNotApplied, ErrUnknownOutcome), or the applied request's error
// (*machine.StaleEpochError, *machine.ReplyError).
type PlaceFunc func(ctx context.Context, req *machine.PlacementRequest) (res machine.PlacementResult, leader string, err error)

var placeKinds = []struct {
	wire memberpb.PlaceKind
	kind machine.PlacementKind
}{
	{memberpb.PlaceKind_IMPORT, machine.PlaceImport},
	{memberpb.PlaceKind_CONFIG, machine.PlaceConfig},
	{memberpb.PlaceKind_APPLY_CONFIG, machine.PlaceApply},
	{memberpb.PlaceKind_DIGEST, machine.PlaceDigest},
}

func placeMessage(group string, r *machine.PlacementRequest) *memberpb.PlaceRequest {
	m := &memberpb.PlaceRequest{Group: group, Epoch: r.Epoch, Digest: r.Digest, Payload: r.Payload, Config: r.Config, Domain: r.Domain}
	for _, k := range placeKinds {
		if k.kind == r.Kind {
			m.Kind = k.wire
		}
	}
	for _, rg := range r.Ranges {
		m.Ranges = append(m.Ranges, &memberpb.SlotRange{From: uint32(rg[0]), To: uint32(rg[1])})
	}
	return m
}

// placementRequest reads a placement request off the wire (ok false: a
// kind this version does not know).
func placementRequest(m *memberpb.PlaceRequest) (*machine.PlacementRequest, bool) {
	r := &machine.PlacementRequest{Epoch: m.GetEpoch(), Digest: m.GetDigest(), Payload: m.GetPayload(), Config: m.GetConfig(), Domain: m.GetDomain()}
	for _, k := range placeKinds {
		if k.wire == m.GetKind() {
			r.Kind = k.kind
		}
	}
	for _, rg := range m.GetRanges() {
		r.Ranges = append(r.Ranges, [2]int{int(rg.GetFrom()), int(rg.GetTo())})
	}
	return r, r.Kind != 0
}

// placeReply is a placement request's answer on the wire.
func placeReply(res machine.PlacementResult, leader string, err error) *memberpb.PlaceReply {
	var stale *machine.StaleEpochError
	var applied *machine.ReplyError
	switch {
	case errors.As(err, &stale):
		return &memberpb.PlaceReply{Code: memberpb.Code_APPLIED, Refusal: memberpb.Refusal_STALE_EPOCH, Epoch: stale.Epoch,
			Detail: stale.Reply, Reason: reasonOnWire(machine.ReasonInvalid)}
	case errors.As(err, &applied):
		return &memberpb.PlaceReply{Code: memberpb.Code_APPLIED, Detail: applied.Reply, Reason: reasonOnWire(applied.Reason)}
	case err != nil:
		return &memberpb.PlaceReply{Code: codeOf(err), Detail: err.Error(), Leader: leader}
	}
	return &memberpb.PlaceReply{Code: memberpb.Code_APPLIED, Digest: res.Digest, Config: res.Config}
}

// placeAnswer is what PlaceReply and 0.4.0's ApplyReply both say.
type placeAnswer interface {
	GetCode() memberpb.Code
	GetLeader() string
	GetDetail() string
	GetRefusal() memberpb.Refusal
	GetEpoch() uint64
}

// notPlaced is why out says its request was not applied (a sentinel), or
// was refused at an epoch its group is past; nil when it applied.
func notPlaced(out placeAnswer) error {
	if err := errOf(out.GetCode()); err != nil {
		if out.GetCode() == memberpb.Code_NOT_LEADER {
			return &NotLeaderError{Leader: out.GetLeader(), Detail: out.GetDetail()}
		}
		return fmt.Errorf("%w (%s)", err, out.GetDetail())
	}
	if out.GetRefusal() == memberpb.Refusal_STALE_EPOCH {
		return &machine.StaleEpochError{Epoch: out.GetEpoch(), Reply: out.GetDetail()}
	}
	return nil
}

// placeResult reads a placement request's answer off the wire.
func placeResult(out *memberpb.PlaceReply) (machine.PlacementResult, error) {
	if err := notPlaced(out); err != nil {
		return machine.PlacementResult{}, err
	}
	if out.GetReason() != memberpb.Reason_REASON_UNSPECIFIED || out.GetDetail() != "" {
		return machine.PlacementResult{}, &machine.ReplyError{Reason: reasonOf(out.GetReason()), Reply: out.GetDetail()}
	}
	return machine.PlacementResult{Digest: out.GetDigest(), Config: out.GetConfig()}, nil
}

// Place asks the member at to, as its group's leader, to log req, and
// returns what its group answered. Its errors wrap the package's
// sentinels (ErrNotLeader's names the leader the member knows), or are
// the applied request's (*machine.StaleEpochError, *machine.ReplyError).
// A member of 0.4.0 (it serves no Place) is sent req as an Apply.
func (c *Client) Place(ctx context.Context, to Addr, req *machine.PlacementRequest) (machine.PlacementResult, error) {
	if _, err := req.Command(); err != nil {
		return machine.PlacementResult{}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	cc, err := c.conn(to)
	if err != nil {
		return machine.PlacementResult{}, err
	}
	if err := ready(ctx, cc); err != nil {
		return machine.PlacementResult{}, fmt.Errorf("%w: %s: %w", ErrUnreachable, to.Port, err)
	}
	out, err := memberpb.NewMemberClient(cc).Place(ctx, placeMessage(to.Group, req))
	if status.Code(err) == codes.Unimplemented {
		return placeAsApply(ctx, cc, to, req)
	}
	if err != nil {
		return machine.PlacementResult{}, callError(to, err)
	}
	return placeResult(out)
}

func (v service) Place(ctx context.Context, in *memberpb.PlaceRequest) (*memberpb.PlaceReply, error) {
	cfg := &v.s.cfg
	if in.GetGroup() != cfg.Group {
		return &memberpb.PlaceReply{Code: memberpb.Code_WRONG_GROUP,
			Detail: fmt.Sprintf("this member is of group %s, not %s", cfg.Group, in.GetGroup())}, nil
	}
	req, ok := placementRequest(in)
	if !ok {
		return &memberpb.PlaceReply{Code: memberpb.Code_REFUSED, Detail: fmt.Sprintf("a placement request of kind %d", in.GetKind())}, nil
	}
	if cfg.Place == nil {
		return &memberpb.PlaceReply{Code: memberpb.Code_REFUSED, Detail: "not a request this member takes"}, nil
	}
	res, leader, err := cfg.Place(ctx, req)
	if codeOf(err) == memberpb.Code_REFUSED {
		cfg.Log.Warn("a member's placement request was refused", "kind", in.GetKind().String(), "err", err)
	}
	return placeReply(res, leader, err), nil
}
