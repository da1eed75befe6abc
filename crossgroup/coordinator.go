// Package crossgroup is the coordinator of a sharded cluster's checks
// that span groups: an RL.CHECK or RL.SHOULDRATELIMIT whose counters sit
// in more than one group is split by group, each group reserves its part
// (RL.PART RESERVE) in parallel, and the check is admitted only when every
// part is. When a part refuses, or cannot be asked, the parts admitted
// elsewhere are cancelled (RL.PART CANCEL: the exact, never-lax refunds of
// reservations); when all admit, each part keeps its charge (RL.PART KEEP
// only drops the reservation). Both happen once, off the reply path; a
// part never settled keeps its charge and is forgotten when its ttl ends,
// so a lost keep or cancel is never lax. A check whose counters all sit in
// one other group is sent there whole (RL.PART DECIDE). Every part carries
// the digest of the domain's rules: a group whose rules differ refuses it,
// and the check fails naming both (ErrRulesDiffer).
package crossgroup

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/machine"
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

// Close waits for the settles in flight and closes the clients.
func (c *Coordinator) Close() {
	c.settling.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.clients {
		cl.Close()
	}
}
