package crossgroup

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/internal/failpoint"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/member"
	"github.com/sluice-rl/sluice/resp"
)

// ErrRulesDiffer: a group holds other rules for the check's domain than
// the coordinator's; the check is not admitted (it would be decided by
// two rule sets).
var ErrRulesDiffer = errors.New("crossgroup: the groups' rules differ")

// Result is a check's answer across groups, as one group's would be.
type Result struct {
	// Limited: some part refused, so nothing was admitted.
	Limited bool
	// Check is an RL.CHECK's answer: the refusing part with the longest
	// retry_after, or the admitting one with the least remaining.
	Check machine.CheckResult
	// Statuses are an RL.SHOULDRATELIMIT's, one per descriptor in request
	// order.
	Statuses []machine.RLSStatus
}

// Spans reports whether the RL.CHECK or RL.SHOULDRATELIMIT args (the
// command's name first) charges a counter another group owns (then Decide
// must run it); a malformed check does not span (its error comes from the
// ordinary path).
func (c *Coordinator) Spans(args [][]byte) bool {
	var buf [8]machine.SplitDescriptor
	_, descs, bad := c.cfg.Machine.Split(args, buf[:0])
	if bad != "" {
		return false
	}
	for _, d := range descs {
		if d.Slot < 0 {
			continue
		}
		if _, mine := c.cfg.Router.Route(d.Slot); !mine {
			return true
		}
		if _, ok := c.cfg.Router.Conflict(d.Slot); ok {
			return true // Decide refuses it
		}
	}
	return false
}

// part is one group's share of a check: the request sent, which of the
// check's descriptors it carries, and the slots of their counters (where
// a reserved part is held).
type part struct {
	group int
	req   machine.PartRequest
	descs []int
	slots []int
	res   machine.PartResult
	err   error
}

// holds reports a part that may hold a charge: admitted, or its outcome
// unknown.
func (p *part) holds() bool {
	if p.err != nil {
		return mayHaveCharged(p.err)
	}
	return !p.res.Limited
}

// reservation is an RL.RESERVE's id and ttl (seconds), its parts held
// under them.
type reservation struct {
	id  string
	ttl int64
	sum uint64 // machine.ReserveArgsSum
}

// Decide runs the RL.CHECK or RL.SHOULDRATELIMIT args across the groups
// its counters sit in.
func (c *Coordinator) Decide(ctx context.Context, args [][]byte) (Result, error) {
	return c.decide(ctx, args, nil)
}

// decide runs a check across groups; with rsv, as an RL.RESERVE whose
// parts every group holds under the reservation's id (args then are
// RL.CHECK's, the reserve's id and ttl taken out).
func (c *Coordinator) decide(ctx context.Context, args [][]byte, rsv *reservation) (Result, error) {
	head, descs, bad := c.cfg.Machine.Split(args, nil)
	if bad != "" {
		return Result{}, errors.New(bad)
	}
	rls := resp.EqualFold(args[0], "rl.shouldratelimit")
	domain := string(args[1])
	rules := c.cfg.Machine.RulesDigest(domain)
	byGroup := map[int]*part{}
	var parts []*part
	for i, d := range descs {
		if d.Slot < 0 {
			continue // no limit: nothing to charge
		}
		if cf, ok := c.cfg.Router.Conflict(d.Slot); ok {
			return Result{}, &SlotConflictError{Described: c.cfg.Router.Describe(cf)}
		}
		g := c.groupOf(d.Slot)
		p := byGroup[g]
		if p == nil {
			p = &part{group: g}
			byGroup[g] = p
			parts = append(parts, p)
		}
		p.descs = append(p.descs, i)
		if !slices.Contains(p.slots, d.Slot) {
			p.slots = append(p.slots, d.Slot)
		}
	}
	res := Result{Check: machine.CheckResult{Limit: -1, Remaining: -1, RetryAfter: -1}}
	if rls {
		res.Statuses = make([]machine.RLSStatus, len(descs))
		for i, d := range descs {
			res.Statuses[i] = d.Status // those of no limit; the parts' replace the others
		}
	}
	if len(parts) == 0 {
		return res, nil
	}
	// One group: the check goes there whole, decided once. More, or a
	// reservation: each reserves its part, kept or cancelled once all
	// have answered.
	id := ""
	held := len(parts) > 1 || rsv != nil
	for _, p := range parts {
		slices.Sort(p.slots)
		p.req = machine.PartRequest{Kind: machine.PartDecide, RLS: rls, Domain: domain, Rules: rules, Head: head}
		switch {
		case rsv != nil:
			id = rsv.id
			p.req.Kind, p.req.ID, p.req.TTL, p.req.Orders = machine.PartReserve, id, rsv.ttl, p.descs
		case len(parts) > 1:
			if id == "" {
				id = rand.Text()
			}
			p.req.Kind, p.req.ID, p.req.TTL = machine.PartReserve, id, partTTL
		}
		for _, i := range p.descs {
			p.req.Descriptors = append(p.req.Descriptors, descs[i].Words)
		}
	}
	if len(parts) > 1 {
		c.counts.checks.Add(1)
		c.counts.parts.Add(int64(len(parts)))
	}
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.res, p.err = c.ask(ctx, p)
		}()
	}
	wg.Wait()
	var failed error
	for _, p := range parts {
		switch {
		case p.err != nil:
			failed = errors.Join(failed, p.err)
		case p.res.Limited:
			res.Limited = true
		}
	}
	var unconfirmed error
	if rsv != nil && failed == nil && !res.Limited {
		// Every part is held: the head, which RL.SETTLE finds, is kept
		// here (a retried reserve finds the first one's).
		var err error
		if res.Check, err = c.holdHead(ctx, parts, domain, rsv); err != nil {
			return Result{}, err
		}
	}
	if held {
		// An admitted check's parts keep their charge: their reservations
		// are left to expire, which keeps it (no call, no log entry). A
		// refused or failed check's that may hold a charge are cancelled
		// — a part whose outcome is unknown too (a cancel of nothing is
		// nil, and leaves a tombstone that refuses the part if it still
		// arrives). The caller is told "refused" or "nothing charged" only
		// once every such part is known to have been given back: a
		// coordinator killed after the answer leaves no charge behind.
		if failed == nil && !res.Limited {
			c.counts.settled.Add(int64(len(parts)))
		} else {
			unconfirmed = c.cancelAll(ctx, parts, domain, id)
		}
		switch {
		case unconfirmed != nil:
			c.counts.unknown.Add(1)
		case failed != nil:
			c.counts.failed.Add(1)
		case res.Limited:
			c.counts.refused.Add(1)
		default:
			c.counts.admitted.Add(1)
		}
	}
	if unconfirmed != nil {
		return Result{}, fmt.Errorf("%w: a part may have been charged and its cancel is not confirmed yet (it is sent again until the part's reservation expires): %w", ErrOutcomeUnknown, errors.Join(failed, unconfirmed))
	}
	if failed != nil {
		switch {
		case errors.Is(failed, ErrRulesDiffer) || errors.Is(failed, ErrNoLeader):
			return Result{}, failed
		case len(parts) == 1 && mayHaveCharged(failed):
			// The whole check went to one group, which may have decided
			// it before the answer was lost: there is nothing to give
			// back, and no saying it was not charged.
			return Result{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, failed)
		}
		return Result{}, fmt.Errorf("%w: %w", ErrPart, failed)
	}
	if rls {
		for _, p := range parts {
			for j, i := range p.descs {
				st := p.res.Statuses[j]
				if res.Limited && !p.res.Limited {
					st = st.Uncharged(descs[i].Hits) // given back: charged nothing
				}
				res.Statuses[i] = st
			}
		}
		return res, nil
	}
	if rsv == nil || res.Limited {
		res.Check = combine(parts, res.Limited)
	}
	return res, nil
}

// combine is an RL.CHECK's answer from its parts': refused, the refusing
// part with the longest retry_after (-1, never, counts as longest);
// allowed, the part with the least remaining.
func combine(parts []*part, refused bool) machine.CheckResult {
	best := -1
	for i, p := range parts {
		r := &p.res.Check
		if refused != r.Limited || r.Limit < 0 {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &parts[best].res.Check
		if refused && rank(r.RetryAfter) > rank(b.RetryAfter) || !refused && r.Remaining < b.Remaining {
			best = i
		}
	}
	if best < 0 {
		return machine.CheckResult{Limit: -1, Remaining: -1, RetryAfter: -1}
	}
	return parts[best].res.Check
}

func rank(retry int64) int64 {
	if retry < 0 {
		return 1<<63 - 1
	}
	return retry
}

func (c *Coordinator) groupOf(s int) int { return c.cfg.Router.Owner(s) }

// ask sends a part to its group's leader and reads its typed answer.
func (c *Coordinator) ask(ctx context.Context, p *part) (machine.PartResult, error) {
	group := c.cfg.Router.Map().Groups[p.group].ID
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if p.req.Kind == machine.PartReserve {
		// Past it the coordinator cancels the part: the group must not
		// decide it later than the cancel's tombstone lives.
		p.req.Deadline = time.Now().Add(c.cfg.Timeout).UnixNano()
	}
	res, err := c.part(ctx, p.group, &p.req)
	switch {
	case errors.Is(err, machine.ErrRulesDiffer):
		return res, fmt.Errorf("%w: group %s: %w", ErrRulesDiffer, group, err)
	case errors.Is(err, machine.ErrFenced):
		// The group no longer owns a counter's slot: a slot moved and this
		// member's router has not heard. Ask every group what it owns now,
		// so the client's retry goes where the slot is.
		c.RefreshClaims(ctx)
		return res, fmt.Errorf("group %s: %w", group, err)
	case err != nil:
		return res, fmt.Errorf("group %s: %w", group, err)
	}
	if p.req.RLS && len(res.Statuses) != len(p.descs) {
		return res, fmt.Errorf("group %s: %w: %d statuses for %d descriptors", group, ErrBadResult, len(res.Statuses), len(p.descs))
	}
	return res, nil
}

// mayHaveCharged reports a part's error after which the part may have
// been charged: neither an answer (an error reply is a part that applied
// nothing) nor a call known not to have applied, nor one never sent (its
// group has no leader known).
func mayHaveCharged(err error) bool {
	var refused *machine.PartError
	return err != nil && !errors.As(err, &refused) && !member.NothingApplied(err) && !errors.Is(err, ErrNoLeader)
}

// cancelAll cancels every part of a check that was not admitted and that
// may hold a charge (admitted, or its outcome unknown), and waits — within
// ctx and the coordinator's Timeout — for each cancel to be confirmed. It
// returns nil when each is (the caller can be told nothing was charged),
// else why not; the cancels not confirmed go on, off the reply path.
func (c *Coordinator) cancelAll(ctx context.Context, parts []*part, domain, id string) error {
	var waits []chan error
	for _, p := range parts {
		if !p.holds() {
			continue // refused, or known not applied: nothing to give back
		}
		// Waited for whether the part admitted or its outcome is unknown:
		// an admitted part's charge is as real as a refusal's reason, and
		// a coordinator killed after answering "refused" must leave none.
		done := make(chan error, 1)
		waits = append(waits, done)
		c.settling.Add(1)
		go func() {
			defer c.settling.Done()
			done <- c.cancel(p, domain, id)
		}()
	}
	if len(waits) == 0 {
		return nil
	}
	wait, stop := context.WithTimeout(ctx, c.cfg.Timeout)
	defer stop()
	for _, done := range waits {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-wait.Done():
			return fmt.Errorf("no cancel confirmed within %v", c.cfg.Timeout)
		}
	}
	return nil
}

// cancel gives back what a part's reservation holds. A cancel is
// idempotent (a second is nil), so one that may not have arrived — the
// group electing a leader, a call lost — is sent again, backing off,
// until the part's reservation would have expired — its own ttl: a
// check's part's partTTL, a reservation's part's the reservation's, up to
// a day — and at least Config.FinishRetry; it carries that ttl, so one
// that finds nothing held leaves a tombstone refusing the part should it
// still arrive, for as long as the part could. One that still fails, or
// is refused, leaves the reservation to its ttl, which keeps the charge
// (never lax), and is logged.
func (c *Coordinator) cancel(p *part, domain, id string) error {
	ttl := max(p.req.TTL, partTTL)
	deadline := time.Now().Add(max(c.cfg.FinishRetry, time.Duration(ttl)*time.Second))
	// Backing off to a second between tries, or to a hundredth of a long
	// ttl: a reservation's part lost for a day is asked for about
	// a hundred times an hour, not every second.
	longest := max(time.Second, time.Duration(ttl)*time.Second/100)
	wait := 25 * time.Millisecond
	var err error
	for {
		if err = c.cfg.Failpoints.Hit(failpoint.CancelPart); err != nil {
			break // an injected failure to send: the charge stays to its ttl
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
		// Sent to the groups owning the part's slots now: a part moves
		// with its slot.
		_, errs := c.inOwners(p.slots, func(g int, slots []int) (machine.PartResult, error) {
			return c.part(ctx, g, &machine.PartRequest{Kind: machine.PartCancel, Domain: domain, ID: id, TTL: ttl, Slots: slots})
		})
		err = errors.Join(errs...)
		if errors.Is(err, machine.ErrFenced) {
			c.RefreshClaims(ctx) // a slot moved: ask where it is now
		}
		cancel()
		if err == nil || !retryable(err) || time.Now().Add(wait).After(deadline) {
			break
		}
		select {
		case <-c.closing:
			deadline = time.Time{} // shutting down: no more tries
		case <-time.After(wait):
		}
		if deadline.IsZero() {
			break
		}
		wait = min(2*wait, longest)
	}
	if err != nil {
		c.counts.lost.Add(1)
		c.cfg.Log.Warn("a check part was not cancelled; its reservation keeps its charge until its ttl",
			"group", c.cfg.Router.Map().Groups[p.group].ID, "err", err)
		return err
	}
	c.counts.cancelled.Add(1)
	return nil
}

// inOwners calls fn for each group owning some of slots now, with its
// slots, in parallel, and returns their results and errors in group
// order.
func (c *Coordinator) inOwners(slots []int, fn func(g int, slots []int) (machine.PartResult, error)) ([]machine.PartResult, []error) {
	byGroup := map[int][]int{}
	var groups []int
	for _, s := range slots {
		g := c.groupOf(s)
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], s)
	}
	slices.Sort(groups)
	results := make([]machine.PartResult, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() { results[i], errs[i] = fn(g, byGroup[g]) })
	}
	wg.Wait()
	return results, errs
}

// anyMayHaveCharged reports whether any of errs may have left a charge.
func anyMayHaveCharged(errs []error) bool {
	return slices.ContainsFunc(errs, mayHaveCharged)
}

// retryable reports a failed cancel worth sending again: not answered, or
// answered that the group cannot decide now; a refusal of another kind
// will not change.
func retryable(err error) bool {
	if errors.Is(err, member.ErrRefused) {
		return false // it will be refused again
	}
	if errors.Is(err, machine.ErrFenced) {
		return true // the slot moved: sent again, it goes where it is
	}
	var refused *machine.PartError
	return !errors.As(err, &refused)
}
