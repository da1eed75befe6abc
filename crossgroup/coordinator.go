// Package crossgroup is the coordinator of a sharded cluster's checks
// that span groups: an RL.CHECK or RL.SHOULDRATELIMIT whose counters sit
// in more than one group is split by group, each group reserves its part
// (RL.PART RESERVE) in parallel, and the check is admitted only when every
// part is. When a part refuses, or cannot be asked, the parts admitted
// elsewhere are cancelled (RL.PART CANCEL: the exact, never-lax refunds of
// reservations), off the reply path, sent again while it may not have
// arrived; when all admit, each part's reservation is left to expire after
// partTTL, which keeps its charge — no call, no log entry. A cancel that
// never arrives leaves the charge too: never lax. A check whose counters all sit in
// one other group is sent there whole (RL.PART DECIDE). Every part carries
// the digest of the domain's rules: a group whose rules differ refuses it,
// and the check fails naming both (ErrRulesDiffer).
package crossgroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/internal/failpoint"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/member"
	"github.com/sluice-rl/sluice/shardmap"
)

// ErrPart: a group's part of a check could not be decided (no leader
// known, a failed call); the check is not admitted. ErrNoLeader, within
// it: a group has no leader known.
var (
	ErrPart     = errors.New("crossgroup: a part of the check failed")
	ErrNoLeader = errors.New("crossgroup: a group has no leader known")
	// ErrSlotConflict: two groups claim a counter's slot at one epoch
	// (shardmap.Conflict); no group decides for it, nothing was sent.
	ErrSlotConflict = errors.New("crossgroup: two groups claim a slot at one epoch")
)

// SlotConflictError is ErrSlotConflict with the conflict said for people.
type SlotConflictError struct{ Described string }

func (e *SlotConflictError) Error() string { return ErrSlotConflict.Error() + ": " + e.Described }
func (e *SlotConflictError) Unwrap() error { return ErrSlotConflict }

// ErrBadResult: a group answered a part with a result that does not fit
// it (a status per descriptor it was sent).
var ErrBadResult = errors.New("crossgroup: a part's result does not fit the part")

// ErrOutcomeUnknown: a check sent whole to one group got no answer; that
// group may have charged it.
var ErrOutcomeUnknown = errors.New("crossgroup: the check's outcome is unknown")

// partTTL is how long a part's reservation is held: an admitted check's
// parts are left to expire (which keeps their charge), so it bounds the
// reservations held (checks across groups per second × partTTL per
// group), and a refused check's cancels must arrive within it.
const partTTL = 10

// Config is what a coordinator needs.
type Config struct {
	// Router is the member's: which group owns each slot, and leaders.
	Router *shardmap.Router
	// Machine plans a check (Machine.DescriptorSlots) with the rules.
	Machine *machine.Machine
	// OwnLeader is the client address of this member's group's leader.
	OwnLeader func() (string, bool)
	// Members reaches the other members on their member port: a check's
	// parts, configuration for every group, a slot's import (package
	// member). MemberAt says where the member whose client address it is
	// takes them.
	Members  Members
	MemberAt func(clientAddr string) (member.Addr, bool)
	// ReportOf asks group g's leader what it knows of its group (the
	// slots its log owns) on the member port; nil: claims are not
	// refreshed on a fenced part (the probe still learns them).
	ReportOf func(ctx context.Context, g int) (member.Report, error)
	// LocalPlace, when set, logs a placement request for this member's
	// own group here, through its log, instead of over a connection to
	// itself: it returns the apply's typed result, or ok false when this
	// member cannot (it does not lead; nothing was logged). LocalPart is
	// the same for a part of a check: the leader coordinating a check
	// saves the round trip to itself.
	LocalPlace func(req *machine.PlacementRequest) (res machine.PlacementResult, ok bool, err error)
	LocalPart  func(req *machine.PartRequest) (res machine.PartResult, ok bool, err error)
	// Timeout bounds one part's call (default 2 s).
	Timeout time.Duration
	// FinishRetry is how long a cancel that could not be sent is sent
	// again (default a part's reservation ttl: until then the cancel can
	// still give the charge back).
	FinishRetry time.Duration
	// Log receives what goes wrong off the reply path.
	Log *slog.Logger
	// Failpoints arm the robustness suite's faults (nil: none).
	Failpoints *failpoint.Points
}

// Coordinator runs checks across groups. Safe for concurrent use.
type Coordinator struct {
	cfg Config
	// closing ends the cancels' retries (Close).
	closing   chan struct{}
	closeOnce sync.Once
	// settling tracks the settles and cancels in flight (Close waits).
	settling sync.WaitGroup
	counts   counters
	// refreshed is when RefreshClaims last asked the groups (Unix ns).
	refreshed atomic.Int64
}

// counters are what Counts reports.
type counters struct {
	checks, parts, admitted, refused, failed, unknown, settled, cancelled, lost atomic.Int64
}

// Counts are a coordinator's totals since it started.
type Counts struct {
	// Checks across groups, and the parts they were split into (groups
	// touched, summed); how the checks ended: admitted, refused (a part
	// refused), failed (a part could not decide, nothing charged),
	// unknown (a part may have been charged and its cancel was not
	// confirmed in time: the caller was told the outcome is unknown).
	Checks, Parts, Admitted, Refused, Failed, Unknown int64
	// Settled are the parts of admitted checks (left to expire, keeping
	// their charge), Cancelled those given back; Lost the cancels that
	// could not be sent (their reservations keep their charge).
	Settled, Cancelled, Lost int64
}

// Counts reports the coordinator's totals.
func (c *Coordinator) Counts() Counts {
	k := &c.counts
	return Counts{Checks: k.checks.Load(), Parts: k.parts.Load(), Admitted: k.admitted.Load(), Refused: k.refused.Load(),
		Failed: k.failed.Load(), Unknown: k.unknown.Load(), Settled: k.settled.Load(), Cancelled: k.cancelled.Load(), Lost: k.lost.Load()}
}

// ErrConfig: a Config a coordinator cannot run with.
var ErrConfig = errors.New("crossgroup: invalid config")

// Validate reports whether a coordinator can run with the config: Router,
// Machine, Members, MemberAt and OwnLeader are required; Timeout and
// FinishRetry are not negative (zero: the defaults).
func (c *Config) Validate() error {
	switch {
	case c.Router == nil:
		return fmt.Errorf("%w: no Router", ErrConfig)
	case c.Machine == nil:
		return fmt.Errorf("%w: no Machine", ErrConfig)
	case c.Members == nil || c.MemberAt == nil:
		return fmt.Errorf("%w: no Members or MemberAt", ErrConfig)
	case c.OwnLeader == nil:
		return fmt.Errorf("%w: no OwnLeader", ErrConfig)
	case c.Timeout < 0 || c.FinishRetry < 0:
		return fmt.Errorf("%w: a negative Timeout or FinishRetry", ErrConfig)
	}
	return nil
}

// New makes a coordinator; the config's zero fields take their defaults.
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.FinishRetry == 0 {
		cfg.FinishRetry = partTTL * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{cfg: cfg, closing: make(chan struct{})}, nil
}

// Members reaches other members on their member port (member.Client):
// a command members send each other applied, a part of a check decided.
type Members interface {
	Place(ctx context.Context, to member.Addr, req *machine.PlacementRequest) (machine.PlacementResult, error)
	Part(ctx context.Context, to member.Addr, req *machine.PartRequest) (machine.PartResult, error)
}

// part sends req to group g's leader: decided here when this member leads
// it (LocalPart), else on the leader's member port.
func (c *Coordinator) part(ctx context.Context, g int, req *machine.PartRequest) (machine.PartResult, error) {
	if g == c.cfg.Router.Self() && c.cfg.LocalPart != nil {
		res, ok, err := c.cfg.LocalPart(req)
		if ok || err != nil {
			return res, err
		}
	}
	to, err := c.leaderAt(g)
	if err != nil {
		return machine.PartResult{}, err
	}
	return c.cfg.Members.Part(ctx, to, req)
}

// leaderAt is where group g's leader takes member calls.
func (c *Coordinator) leaderAt(g int) (member.Addr, error) {
	var addr string
	var ok bool
	if g == c.cfg.Router.Self() {
		addr, ok = c.cfg.OwnLeader()
	} else {
		addr, ok = c.cfg.Router.Leader(g)
	}
	if !ok {
		return member.Addr{}, fmt.Errorf("%w: group %s", ErrNoLeader, c.cfg.Router.Map().Groups[g].ID)
	}
	return c.memberAt(addr)
}

// memberAt is where the member with client address addr takes member
// calls.
func (c *Coordinator) memberAt(addr string) (member.Addr, error) {
	to, ok := c.cfg.MemberAt(addr)
	if !ok {
		return member.Addr{}, fmt.Errorf("%w: no member of the cluster map has the client address %s", member.ErrUnreachable, addr)
	}
	return to, nil
}

// place sends req to group g's leader: logged here when this member
// leads it (LocalPlace), else on the leader's member port.
func (c *Coordinator) place(ctx context.Context, g int, req *machine.PlacementRequest) (machine.PlacementResult, error) {
	if g == c.cfg.Router.Self() && c.cfg.LocalPlace != nil {
		res, ok, err := c.cfg.LocalPlace(req)
		if ok || err != nil {
			return res, err
		}
	}
	to, err := c.leaderAt(g)
	if err != nil {
		return machine.PlacementResult{}, err
	}
	return c.cfg.Members.Place(ctx, to, req)
}

// PlaceGroup sends req to group g's leader (slot migration's imports and
// configuration).
func (c *Coordinator) PlaceGroup(ctx context.Context, g int, req *machine.PlacementRequest) (machine.PlacementResult, error) {
	return c.place(ctx, g, req)
}

// PlaceMember sends req to the member at addr (a redirect's target).
func (c *Coordinator) PlaceMember(ctx context.Context, addr string, req *machine.PlacementRequest) (machine.PlacementResult, error) {
	to, err := c.memberAt(addr)
	if err != nil {
		return machine.PlacementResult{}, err
	}
	return c.cfg.Members.Place(ctx, to, req)
}

// Drain waits for the cancels in flight.
func (c *Coordinator) Drain() { c.settling.Wait() }

// Close ends the cancels' retries and waits for those in flight.
func (c *Coordinator) Close() {
	c.closeOnce.Do(func() { close(c.closing) })
	c.Drain()
}
