package member

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/memberpb"
	"github.com/sluice-rl/sluice/policy"
)

// PartFunc decides a part for a member that asked, through the group's
// log: its typed result, or an error wrapping one of the package's
// sentinels (ErrNotLeader with the leader's client address, ErrRefused,
// ErrNotApplied, ErrUnknownOutcome) or a *machine.PartError (the group
// answered and refused it).
type PartFunc func(ctx context.Context, req *machine.PartRequest) (res machine.PartResult, leader string, err error)

var partKinds = map[memberpb.PartKind]machine.PartKind{
	memberpb.PartKind_RESERVE: machine.PartReserve,
	memberpb.PartKind_DECIDE:  machine.PartDecide,
	memberpb.PartKind_CANCEL:  machine.PartCancel,
	memberpb.PartKind_SETTLE:  machine.PartSettle,
	memberpb.PartKind_HOLD:    machine.PartHold,
}

func partMessage(group string, r *machine.PartRequest) *memberpb.PartRequest {
	m := &memberpb.PartRequest{Group: group, Rls: r.RLS, Domain: r.Domain, Rules: r.Rules, Id: r.ID, TtlSeconds: r.TTL, Head: r.Head,
		Actual: r.Actual, Cancel: r.Cancel, WithHead: r.WithHead, Reply: checkMessage(&r.Reply), ArgsSum: r.ArgsSum,
		DeadlineUnixNano: r.Deadline}
	for _, s := range r.Slots {
		m.Slots = append(m.Slots, int32(s))
	}
	for _, o := range r.Orders {
		m.Orders = append(m.Orders, int32(o))
	}
	for k, v := range partKinds {
		if v == r.Kind {
			m.Kind = k
		}
	}
	m.Descriptors = make([]*memberpb.Words, len(r.Descriptors))
	for i, d := range r.Descriptors {
		m.Descriptors[i] = &memberpb.Words{Words: d}
	}
	return m
}

// partRequest reads a part off the wire (ok false: a kind this version
// does not know).
func partRequest(m *memberpb.PartRequest) (*machine.PartRequest, bool) {
	kind, ok := partKinds[m.GetKind()]
	if !ok {
		return nil, false
	}
	r := &machine.PartRequest{Kind: kind, RLS: m.GetRls(), Domain: m.GetDomain(), Rules: m.GetRules(), ID: m.GetId(),
		TTL: m.GetTtlSeconds(), Head: m.GetHead(), Descriptors: make([][][]byte, len(m.GetDescriptors())),
		Actual: m.GetActual(), Cancel: m.GetCancel(), WithHead: m.GetWithHead(), Reply: checkResult(m.GetReply()), ArgsSum: m.GetArgsSum(),
		Deadline: m.GetDeadlineUnixNano()}
	for _, s := range m.GetSlots() {
		r.Slots = append(r.Slots, int(s))
	}
	for _, o := range m.GetOrders() {
		r.Orders = append(r.Orders, int(o))
	}
	for i, d := range m.GetDescriptors() {
		r.Descriptors[i] = d.GetWords()
	}
	return r, true
}

var refusals = []struct {
	code memberpb.Refusal
	err  error
}{{memberpb.Refusal_FENCED, machine.ErrFenced}, {memberpb.Refusal_RULES_DIFFER, machine.ErrRulesDiffer},
	{memberpb.Refusal_LATE, machine.ErrPartLate}}

// partReply is a part's answer on the wire.
func partReply(res machine.PartResult, err error) *memberpb.PartReply {
	var pe *machine.PartError
	if errors.As(err, &pe) {
		m := &memberpb.PartReply{Code: memberpb.Code_APPLIED, Refusal: memberpb.Refusal_OTHER, Detail: pe.Reply}
		for _, r := range refusals {
			if errors.Is(pe.Kind, r.err) {
				m.Refusal = r.code
			}
		}
		return m
	}
	m := &memberpb.PartReply{Code: memberpb.Code_APPLIED, Limited: res.Limited, Held: res.Held, Check: checkMessage(&res.Check)}
	m.Statuses = statusMessages(res.Statuses)
	for _, r := range res.Settled {
		m.Settled = append(m.Settled, &memberpb.SettleRow{Order: int32(r.Order), Name: r.Name, Reserved: r.Reserved,
			Actual: r.Actual, Refunded: r.Refunded, Charged: r.Charged})
	}
	return m
}

// checkMessage is a check's result on the wire.
func checkMessage(c *machine.CheckResult) *memberpb.CheckResult {
	return &memberpb.CheckResult{Limited: c.Limited, Limit: c.Limit, Remaining: c.Remaining, RetryAfter: c.RetryAfter,
		ResetAfter: c.ResetAfter, Name: c.Name, Window: c.Window}
}

// checkResult reads a check's result off the wire.
func checkResult(c *memberpb.CheckResult) machine.CheckResult {
	return machine.CheckResult{Limited: c.GetLimited(), Limit: c.GetLimit(), Remaining: c.GetRemaining(),
		RetryAfter: c.GetRetryAfter(), ResetAfter: c.GetResetAfter(), Name: c.GetName(), Window: c.GetWindow()}
}

// statusMessages are statuses on the wire.
func statusMessages(statuses []machine.RLSStatus) []*memberpb.RLSStatus {
	out := make([]*memberpb.RLSStatus, len(statuses))
	for i := range statuses {
		s := &statuses[i]
		out[i] = &memberpb.RLSStatus{Code: int32(s.Code), RequestsPerUnit: s.RequestsPerUnit, Unit: int32(s.Unit),
			Name: s.Name, Remaining: s.Remaining, ResetSeconds: s.ResetSeconds, Shadow: s.Shadow, PolicyQuota: s.PolicyQuota, PolicyWindow: s.PolicyWindow, UnitMultiplier: s.Multiplier}
	}
	return out
}

// statusesOf reads statuses off the wire (nil for none).
func statusesOf(m []*memberpb.RLSStatus) []machine.RLSStatus {
	if len(m) == 0 {
		return nil
	}
	out := make([]machine.RLSStatus, len(m))
	for i, s := range m {
		out[i] = machine.RLSStatus{Code: int(s.GetCode()), RequestsPerUnit: s.GetRequestsPerUnit(), Unit: policy.Unit(s.GetUnit()),
			Name: s.GetName(), Remaining: s.GetRemaining(), ResetSeconds: s.GetResetSeconds(), Shadow: s.GetShadow(),
			PolicyQuota: s.GetPolicyQuota(), PolicyWindow: s.GetPolicyWindow(), Multiplier: s.GetUnitMultiplier()}
	}
	return out
}

// partResult reads a part's answer off the wire: the result, or the
// group's refusal as a *machine.PartError.
func partResult(m *memberpb.PartReply) (machine.PartResult, error) {
	if r := m.GetRefusal(); r != memberpb.Refusal_REFUSAL_UNSPECIFIED {
		pe := &machine.PartError{Reply: m.GetDetail()}
		for _, x := range refusals {
			if x.code == r {
				pe.Kind = x.err
			}
		}
		return machine.PartResult{}, pe
	}
	res := machine.PartResult{Limited: m.GetLimited(), Held: m.GetHeld(), Check: checkResult(m.GetCheck())}
	res.Statuses = statusesOf(m.GetStatuses())
	for _, r := range m.GetSettled() {
		res.Settled = append(res.Settled, machine.SettleRow{Order: int(r.GetOrder()), Name: r.GetName(), Reserved: r.GetReserved(),
			Actual: r.GetActual(), Refunded: r.GetRefunded(), Charged: r.GetCharged()})
	}
	return res, nil
}

func (v service) Part(ctx context.Context, in *memberpb.PartRequest) (*memberpb.PartReply, error) {
	cfg := &v.s.cfg
	if in.GetGroup() != cfg.Group {
		return &memberpb.PartReply{Code: memberpb.Code_WRONG_GROUP,
			Detail: fmt.Sprintf("this member is of group %s, not %s", cfg.Group, in.GetGroup())}, nil
	}
	req, ok := partRequest(in)
	if !ok || cfg.Part == nil {
		return &memberpb.PartReply{Code: memberpb.Code_REFUSED, Detail: "not a part this member knows"}, nil
	}
	res, leader, err := cfg.Part(ctx, req)
	var pe *machine.PartError
	if err != nil && !errors.As(err, &pe) {
		return &memberpb.PartReply{Code: codeOf(err), Detail: err.Error(), Leader: leader}, nil
	}
	return partReply(res, err), nil
}

// Part asks the member at to, as its group's leader, to decide, reserve or
// cancel its group's part of a check. A group that answered and refused
// it is a *machine.PartError; the other errors wrap the package's
// sentinels.
func (c *Client) Part(ctx context.Context, to Addr, req *machine.PartRequest) (machine.PartResult, error) {
	cc, err := c.conn(to)
	if err != nil {
		return machine.PartResult{}, err
	}
	if err := ready(ctx, cc); err != nil {
		return machine.PartResult{}, fmt.Errorf("%w: %s: %w", ErrUnreachable, to.Port, err)
	}
	out, err := memberpb.NewMemberClient(cc).Part(ctx, partMessage(to.Group, req))
	if err != nil {
		return machine.PartResult{}, callError(to, err)
	}
	if out.GetCode() == memberpb.Code_NOT_LEADER {
		return machine.PartResult{}, &NotLeaderError{Leader: out.GetLeader(), Detail: out.GetDetail()}
	}
	if err := errOf(out.GetCode()); err != nil {
		return machine.PartResult{}, fmt.Errorf("%w (%s)", err, out.GetDetail())
	}
	return partResult(out)
}
