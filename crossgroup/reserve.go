package crossgroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/resp"
)

// An RL.RESERVE whose counters sit in more than one group is held as
// parts: each group reserves its share under the reservation's id (one
// record per slot of its counters, so a part moves with its slot), and
// once every part is admitted this member — its domain's group's leader,
// where clients send RL.RESERVE and RL.SETTLE — keeps the head: the
// reply, and the slots of the parts. A part refused, or failed, cancels
// the others as a check's do. RL.SETTLE and RL.CANCEL read the head, settle
// the parts in the groups that own their slots now, then the head: the
// rows come back in the reserve's order, with the exact refunds of a
// reservation held in one group.

// ErrBadReserve: an RL.RESERVE or RL.SETTLE whose words do not parse (the
// machine's checks answer it before it gets here).
var ErrBadReserve = errors.New("crossgroup: malformed reservation command")

// ErrSettledInPart: a settle across groups settled the parts of some
// groups, not all (one had no leader, or did not answer): the head is
// kept, and the same settle again settles the rest (those settled answer
// nothing again). It is not "nothing applied".
var ErrSettledInPart = errors.New("crossgroup: the reservation was settled in part")

// ErrHeldOther: the reservation id is held by a reserve of other
// arguments (HeldWithOtherArgs says it to clients).
var ErrHeldOther = errors.New("crossgroup: the reservation id is held with other arguments")

// reserveCheck is an RL.RESERVE's words as RL.CHECK's, with its id, ttl
// and arguments' sum.
func reserveCheck(args [][]byte) ([][]byte, *reservation, error) {
	if len(args) < 5 {
		return nil, nil, ErrBadReserve
	}
	ttl, ok := resp.ParseInt(args[3])
	if !ok || ttl < 1 {
		return nil, nil, ErrBadReserve
	}
	check := make([][]byte, 0, len(args)-2)
	check = append(check, []byte("RL.CHECK"), args[1])
	return append(check, args[4:]...), &reservation{id: string(args[2]), ttl: ttl, sum: machine.ReserveArgsSum(args[3:])}, nil
}

// ReserveSpans reports whether an RL.RESERVE's counters sit in a group
// other than this member's (then Reserve must run it).
func (c *Coordinator) ReserveSpans(args [][]byte) bool {
	check, _, err := reserveCheck(args)
	return err == nil && c.Spans(check)
}

// Reserve runs an RL.RESERVE across groups: RL.CHECK's answer, the parts
// held and the head kept when it is admitted. A reserve whose head is held
// already (a retry after a lost reply) is answered from it, asking no
// group: the same reply, nothing charged; with other arguments it is
// ErrHeldOther.
func (c *Coordinator) Reserve(ctx context.Context, args [][]byte) (Result, error) {
	check, rsv, err := reserveCheck(args)
	if err != nil {
		return Result{}, err
	}
	if reply, sum, ok := c.cfg.Machine.HeldReserve(string(args[1]), args[2]); ok {
		if sum != 0 && sum != rsv.sum {
			return Result{}, ErrHeldOther
		}
		return Result{Check: reply}, nil
	}
	return c.decide(ctx, check, rsv)
}

// holdHead keeps the head of a reservation whose parts every group
// admitted, and returns its reply (the first one's, for a retry).
func (c *Coordinator) holdHead(ctx context.Context, parts []*part, domain string, rsv *reservation) (machine.CheckResult, error) {
	var slots []int
	for _, p := range parts {
		slots = append(slots, p.slots...)
	}
	slices.Sort(slots)
	req := machine.PartRequest{Kind: machine.PartHold, Domain: domain, ID: rsv.id, TTL: rsv.ttl,
		Reply: combine(parts, false), Slots: slices.Compact(slots), ArgsSum: rsv.sum}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	res, err := c.part(ctx, c.cfg.Router.Self(), &req)
	if errors.Is(err, machine.ErrHeldOther) {
		return machine.CheckResult{}, ErrHeldOther
	}
	if err != nil {
		// The parts hold the charge; a reserve sent again with the same
		// id finds them (charging nothing) and keeps the head.
		return machine.CheckResult{}, fmt.Errorf("%w: every group holds its part, but the reservation's head was not kept (the same RL.RESERVE again completes it): %w", ErrOutcomeUnknown, err)
	}
	return res.Check, nil
}

// SettleSpans reports whether an RL.SETTLE or RL.CANCEL's reservation has
// parts in slots another group owns (then Settle must run it).
func (c *Coordinator) SettleSpans(args [][]byte) bool {
	if len(args) < 3 {
		return false
	}
	slots, ok := c.cfg.Machine.HeldSlots(string(args[1]), args[2])
	if !ok {
		return false
	}
	self := c.cfg.Router.Self()
	for _, s := range slots {
		if c.groupOf(s) != self {
			return true
		}
	}
	return false
}

// Settle runs an RL.SETTLE or RL.CANCEL of a reservation held across
// groups: each group settles its parts, then this one its own with the
// head. held is false when no head is held (the reply is nil). A group
// that fails leaves the head, so the same settle again settles what is
// left (the parts settled already answer nothing).
func (c *Coordinator) Settle(ctx context.Context, args [][]byte) (rows []machine.SettleRow, held bool, err error) {
	if len(args) < 3 {
		return nil, false, ErrBadReserve
	}
	domain, id := string(args[1]), string(args[2])
	req := machine.PartRequest{Kind: machine.PartSettle, Domain: domain, ID: id, Cancel: resp.EqualFold(args[0], "rl.cancel")}
	if !req.Cancel {
		if len(args) < 4 {
			return nil, false, ErrBadReserve
		}
		n, err := strconv.ParseInt(string(args[3]), 10, 64)
		if err != nil {
			return nil, false, ErrBadReserve
		}
		req.Actual = n
	}
	slots, ok := c.cfg.Machine.HeldSlots(domain, args[2])
	if !ok {
		return nil, false, nil
	}
	self := c.cfg.Router.Self()
	var local, remote []int
	for _, s := range slots {
		if c.groupOf(s) == self {
			local = append(local, s)
		} else {
			remote = append(remote, s)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	results, errs := c.inOwners(remote, func(g int, slots []int) (machine.PartResult, error) {
		r := req
		r.Slots = slots
		return c.part(ctx, g, &r)
	})
	// failed is why the settle did not finish: unknown if a group may have
	// applied it, settled in part if one did, else nothing settled.
	failed := func(err error, mayHave bool) error {
		switch {
		case mayHave:
			return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		case slices.ContainsFunc(results, func(r machine.PartResult) bool { return r.Held }):
			return fmt.Errorf("%w: %w", ErrSettledInPart, err)
		}
		return fmt.Errorf("%w: %w", ErrPart, err)
	}
	if err := errors.Join(errs...); err != nil {
		if errors.Is(err, machine.ErrFenced) {
			c.RefreshClaims(ctx)
		}
		return nil, false, failed(err, anyMayHaveCharged(errs))
	}
	for _, r := range results {
		rows = append(rows, r.Settled...)
	}
	r := req
	r.Slots, r.WithHead = local, true
	res, err := c.part(ctx, self, &r)
	if err != nil {
		// The other groups' parts are settled already: in part.
		return nil, false, failed(err, mayHaveCharged(err))
	}
	rows = append(rows, res.Settled...)
	if !res.Held && len(rows) == 0 {
		return nil, false, nil // settled meanwhile by another
	}
	slices.SortStableFunc(rows, func(a, b machine.SettleRow) int { return a.Order - b.Order })
	return rows, true, nil
}
