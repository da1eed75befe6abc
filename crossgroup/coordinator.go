// Package crossgroup is the coordinator of a sharded cluster's checks
// that span groups: an RL.CHECK whose counters sit in more than one group
// is split by group, each group reserves its part (RL.PART RESERVE) in
// parallel, and the check is admitted only when every part is. When a part
// refuses, or cannot be asked, the parts admitted elsewhere are cancelled
// (RL.PART CANCEL: the exact, never-lax refunds of reservations); when
// all admit, each part is settled at its cost (RL.PART SETTLE, which only
// drops the reservation). Both happen once, off the reply path; a part
// never settled keeps its charge and is forgotten when its ttl ends, so a
// lost settle or cancel is never lax.
package crossgroup

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/shardmap"
)

// ErrPart: a group's part of a check could not be decided (no leader
// known, a failed call); the check is not admitted. ErrNoLeader, within
// it: a group has no leader known.
var (
	ErrPart     = errors.New("crossgroup: a part of the check failed")
	ErrNoLeader = errors.New("crossgroup: a group has no leader known")
)

// partTTL is how long a part's reservation is held if its settle or
// cancel is lost.
const partTTL = 60

// Config is what a coordinator needs.
type Config struct {
	// Router is the member's: which group owns each slot, and leaders.
	Router *shardmap.Router
	// Machine plans a check (Machine.DescriptorSlots) with the rules.
	Machine *machine.Machine
	// OwnLeader is the client address of this member's group's leader.
	OwnLeader func() (string, bool)
	// Password is every member's --requirepass ("" for none).
	Password string
	// Timeout bounds one part's call (default 2 s).
	Timeout time.Duration
	// Log receives what goes wrong off the reply path.
	Log *slog.Logger
}

// Coordinator runs checks across groups. Safe for concurrent use.
type Coordinator struct {
	cfg     Config
	mu      sync.Mutex
	clients map[string]*redis.Client
	// settling tracks the settles and cancels in flight (Close waits).
	settling sync.WaitGroup
	counts   counters
}

// counters are what Counts reports.
type counters struct {
	checks, parts, admitted, refused, failed, settled, cancelled, lost atomic.Int64
}

// Counts are a coordinator's totals since it started.
type Counts struct {
	// Checks across groups, and the parts they were split into (groups
	// touched, summed); how the checks ended: admitted, refused (a part
	// refused), failed (a part could not decide).
	Checks, Parts, Admitted, Refused, Failed int64
	// Settled and Cancelled are the parts finished (a cancel is a refund);
	// Lost the settles and cancels that could not be sent (their
	// reservations keep their charge until their ttl).
	Settled, Cancelled, Lost int64
}

// Counts reports the coordinator's totals.
func (c *Coordinator) Counts() Counts {
	k := &c.counts
	return Counts{Checks: k.checks.Load(), Parts: k.parts.Load(), Admitted: k.admitted.Load(), Refused: k.refused.Load(),
		Failed: k.failed.Load(), Settled: k.settled.Load(), Cancelled: k.cancelled.Load(), Lost: k.lost.Load()}
}

// New makes a coordinator.
func New(cfg Config) *Coordinator {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{cfg: cfg, clients: map[string]*redis.Client{}}
}

// Spans reports whether the RL.CHECK args charges a counter another group
// owns (then Check must run it); a malformed check does not span (its
// error comes from the ordinary path).
func (c *Coordinator) Spans(args [][]byte) bool {
	slots, bad := c.cfg.Machine.DescriptorSlots(args)
	if bad != "" {
		return false
	}
	for _, s := range slots {
		if s < 0 {
			continue
		}
		if _, mine := c.cfg.Router.Route(s); !mine {
			return true
		}
	}
	return false
}

// part is one group's share of a check.
type part struct {
	group int
	args  []any
	res   machine.CheckResult
	err   error
}

// Check runs the RL.CHECK args across the groups its counters sit in, and
// returns the check's answer as one group's would be: refused when any
// part refused (the binding limit the one with the longest retry_after),
// else the part with the least remaining.
func (c *Coordinator) Check(ctx context.Context, args [][]byte) (machine.CheckResult, error) {
	slots, bad := c.cfg.Machine.DescriptorSlots(args)
	if bad != "" {
		return machine.CheckResult{}, errors.New(bad)
	}
	domain := string(args[1])
	cost := []byte("1")
	i := 2
	if resp.EqualFold(args[i], "cost") {
		cost, i = args[i+1], i+2
	}
	// Descriptor d is args[starts[d]:starts[d+1]] (each begins with its
	// DESCRIPTOR token).
	var starts []int
	for j := i; j < len(args); j++ {
		if resp.EqualFold(args[j], "descriptor") {
			starts = append(starts, j)
		}
	}
	starts = append(starts, len(args))
	id := rand.Text()
	byGroup := map[int]*part{}
	var parts []*part
	for d, s := range slots {
		if s < 0 {
			continue // no limit: nothing to charge
		}
		g := c.groupOf(s)
		p := byGroup[g]
		if p == nil {
			p = &part{group: g, args: []any{"RL.PART", "RESERVE", domain, id, partTTL, "COST", string(cost)}}
			byGroup[g] = p
			parts = append(parts, p)
		}
		for _, a := range args[starts[d]:starts[d+1]] {
			p.args = append(p.args, string(a))
		}
	}
	if len(parts) == 0 {
		return machine.CheckResult{Limit: -1, Remaining: -1, RetryAfter: -1}, nil
	}
	c.counts.checks.Add(1)
	c.counts.parts.Add(int64(len(parts)))
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.res, p.err = c.reserve(ctx, p)
		}()
	}
	wg.Wait()
	var failed error
	refused := false
	for _, p := range parts {
		switch {
		case p.err != nil:
			failed = errors.Join(failed, p.err)
		case p.res.Limited:
			refused = true
		}
	}
	// Settle or cancel every part, off the reply path: an admitted check's
	// parts keep their charge, a refused or failed one's give it back (a
	// part whose outcome is unknown is cancelled too: a cancel of nothing
	// is nil).
	admit := failed == nil && !refused
	for _, p := range parts {
		p := p
		c.settling.Add(1)
		go func() {
			defer c.settling.Done()
			c.finish(p, domain, id, string(cost), admit)
		}()
	}
	switch {
	case failed != nil:
		c.counts.failed.Add(1)
		return machine.CheckResult{}, fmt.Errorf("%w: %w", ErrPart, failed)
	case refused:
		c.counts.refused.Add(1)
	default:
		c.counts.admitted.Add(1)
	}
	return combine(parts, refused), nil
}

// combine is the answer of the parts: refused, the refusing part with the
// longest retry_after (-1, never, counts as longest); allowed, the part
// with the least remaining.
func combine(parts []*part, refused bool) machine.CheckResult {
	best := -1
	for i, p := range parts {
		if refused != p.res.Limited || p.res.Limit < 0 {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &parts[best].res
		if refused && rank(p.res.RetryAfter) > rank(b.RetryAfter) || !refused && p.res.Remaining < b.Remaining {
			best = i
		}
	}
	if best < 0 {
		return machine.CheckResult{Limit: -1, Remaining: -1, RetryAfter: -1}
	}
	return parts[best].res
}

func rank(retry int64) int64 {
	if retry < 0 {
		return 1<<63 - 1
	}
	return retry
}

func (c *Coordinator) groupOf(s int) int {
	m := c.cfg.Router.Map()
	for g := range m.Groups {
		if m.Groups[g].Owns(s) {
			return g
		}
	}
	return -1
}

// reserve sends a part to its group's leader and reads its RL.CHECK-shaped
// answer.
func (c *Coordinator) reserve(ctx context.Context, p *part) (machine.CheckResult, error) {
	cl, err := c.client(p.group)
	if err != nil {
		return machine.CheckResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	v, err := cl.Do(ctx, p.args...).Slice()
	if err != nil {
		return machine.CheckResult{}, fmt.Errorf("group %s: %w", c.cfg.Router.Map().Groups[p.group].ID, err)
	}
	return checkResult(v)
}

// checkResult reads a part's reply (as go-redis decodes it).
func checkResult(v []any) (machine.CheckResult, error) {
	if len(v) != 7 {
		return machine.CheckResult{}, fmt.Errorf("%w: a part answered %d elements", ErrPart, len(v))
	}
	var n [5]int64
	for i := range n {
		x, ok := v[i].(int64)
		if !ok {
			return machine.CheckResult{}, fmt.Errorf("%w: element %d of a part's answer is not an integer", ErrPart, i)
		}
		n[i] = x
	}
	name, _ := v[5].(string)
	window, _ := v[6].(int64)
	return machine.CheckResult{Limited: n[0] == 1, Limit: n[1], Remaining: n[2], RetryAfter: n[3], ResetAfter: n[4], Name: name, Window: window}, nil
}

// finish settles (admit) or cancels a part, once; a failure leaves the
// reservation to its ttl, which keeps the charge (never lax), and is
// logged.
func (c *Coordinator) finish(p *part, domain, id, cost string, admit bool) {
	cl, err := c.client(p.group)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
		defer cancel()
		if admit {
			err = cl.Do(ctx, "RL.PART", "SETTLE", domain, id, cost).Err()
		} else {
			err = cl.Do(ctx, "RL.PART", "CANCEL", domain, id).Err()
		}
		if errors.Is(err, redis.Nil) {
			err = nil // nothing held (the reserve never applied)
		}
	}
	switch {
	case err != nil:
		c.counts.lost.Add(1)
		c.cfg.Log.Warn("a check part was not settled; its reservation keeps its charge until its ttl",
			"group", c.cfg.Router.Map().Groups[p.group].ID, "admit", admit, "err", err)
	case admit:
		c.counts.settled.Add(1)
	default:
		c.counts.cancelled.Add(1)
	}
}

// client is a kept-open client to group g's leader.
func (c *Coordinator) client(g int) (*redis.Client, error) {
	var addr string
	var ok bool
	if g == c.cfg.Router.Self() {
		addr, ok = c.cfg.OwnLeader()
	} else {
		addr, ok = c.cfg.Router.Leader(g)
	}
	if !ok {
		return nil, fmt.Errorf("%w: group %s", ErrNoLeader, c.cfg.Router.Map().Groups[g].ID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.clients[addr]
	if cl == nil {
		cl = redis.NewClient(&redis.Options{Addr: addr, Password: c.cfg.Password, MaxRetries: -1, Protocol: 2,
			DisableIdentity: true, PoolSize: 64, DialTimeout: time.Second})
		c.clients[addr] = cl
	}
	return cl, nil
}

// Propagate applies a configuration command this group applied (RL.RULES,
// RL.OVERRIDE, RL.SCALE) in every other group too, in parallel
// (RL.PART APPLY); the error names the groups that did not take it.
func (c *Coordinator) Propagate(ctx context.Context, args [][]byte) error {
	m := c.cfg.Router.Map()
	words := make([]any, 0, len(args)+2)
	words = append(words, "RL.PART", "APPLY")
	for _, a := range args {
		words = append(words, string(a))
	}
	errs := make([]error, len(m.Groups))
	var wg sync.WaitGroup
	for g := range m.Groups {
		if g == c.cfg.Router.Self() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := c.client(g)
			if err == nil {
				ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
				defer cancel()
				err = cl.Do(ctx, words...).Err()
			}
			if err != nil {
				errs[g] = fmt.Errorf("group %s: %w", m.Groups[g].ID, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close waits for the settles in flight and closes the clients.
func (c *Coordinator) Close() {
	c.settling.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.clients {
		cl.Close()
	}
}
