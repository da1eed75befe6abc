package crossgroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/shardmap"
)

// Propagate applies a configuration command this group applied (RL.RULES,
// RL.OVERRIDE, RL.SCALE) in every other group too, in parallel
// (RL.PART APPLY); the error names the groups that did not take it.
func (c *Coordinator) Propagate(ctx context.Context, args [][]byte) error {
	return c.PropagateExcept(ctx, args, "")
}

// PropagateExcept is Propagate to every other group but the one named
// skip (a group being added, which starts from the live map instead).
// The commands are idempotent, so a group whose call failed (lost, or its
// leader changing) is sent it again, up to propagateAttempts times in
// all: with a hundred groups, one lost call in each attempt is the rule,
// not the exception.
func (c *Coordinator) PropagateExcept(ctx context.Context, args [][]byte, skip string) error {
	req := &machine.PlacementRequest{Kind: machine.PlaceApply, Config: args}
	m := c.cfg.Router.Map()
	pending := func(g int) bool { return m.Groups[g].ID != skip }
	var errs []error
	for attempt := range propagateAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(errs...)
			case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
			}
		}
		_, errs = c.fanOut(ctx, m, req, pending)
		failed := errs
		pending = func(g int) bool { return failed[g] != nil }
		if errors.Join(errs...) == nil {
			return nil
		}
	}
	return errors.Join(errs...)
}

// propagateAttempts is how many times PropagateExcept sends a group a
// command it did not take.
const propagateAttempts = 3

// RulesDiffer compares the digest of domain's rules ("" for every domain)
// in every group with this one's: "" when all agree, else each group's
// digest ("g1 3fa2… g2 none"). A group that cannot be asked is an error.
func (c *Coordinator) RulesDiffer(ctx context.Context, domain string) (string, error) {
	digests, err := c.everyOther(ctx, &machine.PlacementRequest{Kind: machine.PlaceDigest, Domain: domain}, "")
	if err != nil {
		return "", err
	}
	m := c.cfg.Router.Map()
	digests[c.cfg.Router.Self()] = c.cfg.Machine.RulesDigest(domain)
	var live []string // removed groups are asked nothing
	for g, d := range digests {
		if g < len(m.Groups) && !m.Groups[g].Removed {
			live = append(live, d)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(live)))) == 1 {
		return "", nil
	}
	var b strings.Builder
	for g, d := range digests {
		if g >= len(m.Groups) || m.Groups[g].Removed {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(m.Groups[g].ID + " " + d)
	}
	return b.String(), nil
}

// everyOther sends req, a digest's, to every other group's leader in
// parallel, and returns each group's digest (this group's is left empty);
// the error names the groups that did not answer.
func (c *Coordinator) everyOther(ctx context.Context, req *machine.PlacementRequest, skip string) ([]string, error) {
	m := c.cfg.Router.Map()
	replies, errs := c.fanOut(ctx, m, req, func(g int) bool { return m.Groups[g].ID != skip })
	return replies, errors.Join(errs...)
}

// fanOut sends req to the leader of every other live group of m that want
// accepts, in parallel: each group's digest and error, by index.
func (c *Coordinator) fanOut(ctx context.Context, m *shardmap.Map, req *machine.PlacementRequest, want func(g int) bool) ([]string, []error) {
	replies := make([]string, len(m.Groups))
	errs := make([]error, len(m.Groups))
	var wg sync.WaitGroup
	for g := range m.Groups {
		if g == c.cfg.Router.Self() || m.Groups[g].Removed || !want(g) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
			defer cancel()
			res, err := c.place(ctx, g, req)
			replies[g] = res.Digest
			if err != nil {
				errs[g] = fmt.Errorf("group %s: %w", m.Groups[g].ID, err)
			}
		}()
	}
	wg.Wait()
	return replies, errs
}
