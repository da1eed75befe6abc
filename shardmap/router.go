package shardmap

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluice-rl/sluice/slot"
)

// Router tells a member of one group where each slot's commands go: its
// own group, or another group's leader (the last one learned).
// It is safe for concurrent use.
//
// Which group owns a slot is live: the map file only starts it. Each group
// logs the slots it owns, at an epoch (the state machine's fence, which
// slot migration changes); the router keeps each group's latest claim as
// learned (Claim: its own group's from its state machine, the others' from
// their members) and routes a slot to the group whose claim of it has the
// highest epoch. A slot no claim names (cut from its source, not yet
// imported) stays with its last owner, which answers TRYAGAIN until the
// import is learned. Claims only ever move forward, so a stale report
// never routes a slot back.
type Router struct {
	// m is the map routed by: the file's groups, then those added while
	// running (AddGroup). Groups are only ever appended, so a group's
	// index never changes.
	m      atomic.Pointer[Map]
	self   int
	mu     sync.Mutex // serializes claims and added groups
	claims []claim
	table  atomic.Pointer[ownerTable]
	// leaders holds each group's last known leader client address ("":
	// unknown).
	leaders []atomic.Pointer[string]
	// lastLeaders holds each group's last leader ever known; answered
	// the client addresses of the members that answered the latest probe.
	lastLeaders []atomic.Pointer[string]
	answered    []atomic.Pointer[[]string]
	// lags holds each other group's lag behind this member's wall clock
	// as last measured, ns (math.MinInt64: never measured).
	lags []atomic.Int64
	// jobs holds the views of each group's migrations as its leader last
	// said.
	jobs []atomic.Pointer[[]JobView]
	// ownLog, when set, says whether this member's group's log owns slot
	// s: it is ahead of any claim (the group took s, the router has not
	// heard yet).
	ownLog func(s int) bool
}

// SetOwnLog makes the router ask owns (this member's state machine) first
// whether its own group owns a slot. Call it before routing.
func (r *Router) SetOwnLog(owns func(s int) bool) { r.ownLog = owns }

// NewRouter is the router of a member of group selfGroup.
func NewRouter(m *Map, selfGroup string) (*Router, error) {
	for i := range m.Groups {
		if m.Groups[i].ID == selfGroup {
			r := &Router{self: i, leaders: make([]atomic.Pointer[string], MaxGroups), lastLeaders: make([]atomic.Pointer[string], MaxGroups),
				answered: make([]atomic.Pointer[[]string], MaxGroups),
				lags:     make([]atomic.Int64, MaxGroups),
				jobs:     make([]atomic.Pointer[[]JobView], MaxGroups)}
			r.m.Store(m)
			for g := range r.lags {
				r.lags[g].Store(math.MinInt64)
			}
			r.claims = make([]claim, len(m.Groups))
			t := &ownerTable{owner: m.owner}
			for g := range m.Groups {
				r.claims[g].epoch = m.Epoch
				if e := m.Groups[g].Epoch; e != 0 {
					r.claims[g].epoch = e
				}
				for _, rg := range m.Groups[g].Ranges {
					for s := rg.From; s <= rg.To; s++ {
						r.claims[g].bits[s/64] |= 1 << (s % 64)
					}
				}
			}
			for _, c := range r.claims {
				t.epoch = max(t.epoch, c.epoch)
			}
			r.table.Store(t)
			return r, nil
		}
	}
	return nil, fmt.Errorf("%w: no group %q", ErrMap, selfGroup)
}

// MaxGroups is the most groups a cluster can have.
const MaxGroups = 1024

// Map is the map routed by.
func (r *Router) Map() *Map { return r.m.Load() }

// AddGroup adds a group that joined the running cluster (it owns no slots
// until some move to it); it is a no-op for a group already known. It
// returns the group's index.
func (r *Router) AddGroup(g Group) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.m.Load()
	for i := range cur.Groups {
		if cur.Groups[i].ID == g.ID {
			return i, nil
		}
	}
	if len(cur.Groups) >= MaxGroups {
		return -1, fmt.Errorf("%w: more than %d groups", ErrMap, MaxGroups)
	}
	next := *cur
	next.Groups = append(slices.Clip(cur.Groups), g)
	r.claims = append(r.claims, claim{})
	r.lags[len(cur.Groups)].Store(math.MinInt64)
	r.m.Store(&next)
	return len(cur.Groups), nil
}

// RemoveGroup marks group g removed (it must own no slots).
func (r *Router) RemoveGroup(g int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.m.Load()
	if cur.Groups[g].Removed {
		return
	}
	next := *cur
	next.Groups = slices.Clone(cur.Groups)
	next.Groups[g].Removed = true
	r.m.Store(&next)
	r.rebuild() // its claims count no more: a conflict with it ends
}

// ClaimEpoch is the epoch of group g's claim as last learned.
func (r *Router) ClaimEpoch(g int) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.claims[g].epoch
}

// Self is the index of this member's group.
func (r *Router) Self() int { return r.self }

// Route is where a command for slot s goes: mine when this member's group
// owns it, else the owner's leader's client address ("" while none is
// known).
func (r *Router) Route(s int) (addr string, mine bool) {
	g := r.Owner(s)
	if g == r.self {
		return "", true
	}
	addr, _ = r.Leader(g)
	return addr, false
}

// SetLeader records group g's leader client address ("": none known).
func (r *Router) SetLeader(g int, addr string) {
	r.leaders[g].Store(&addr)
	if addr != "" {
		r.lastLeaders[g].Store(&addr)
	}
}

// SetAnswered records the client addresses of group g's members that
// answered the latest probe (up, whether or not they lead).
func (r *Router) SetAnswered(g int, addrs []string) { r.answered[g].Store(&addrs) }

// Answered is what SetAnswered last recorded for group g (nil: never).
func (r *Router) Answered(g int) []string {
	if p := r.answered[g].Load(); p != nil {
		return *p
	}
	return nil
}

// LastLeader is the last leader group g was known to have ("" if none
// ever was), which stands for the group in the topology replies while it
// has none.
func (r *Router) LastLeader(g int) string {
	if p := r.lastLeaders[g].Load(); p != nil {
		return *p
	}
	return ""
}

// Leader is group g's last known leader client address, if any.
func (r *Router) Leader(g int) (string, bool) {
	if p := r.leaders[g].Load(); p != nil && *p != "" {
		return *p, true
	}
	return "", false
}

// SetJobViews records the views of group g's migrations (its leader's
// word; nil: none).
func (r *Router) SetJobViews(g int, views []JobView) { r.jobs[g].Store(&views) }

// JobViews is what SetJobViews last recorded for group g.
func (r *Router) JobViews(g int) []JobView {
	if p := r.jobs[g].Load(); p != nil {
		return *p
	}
	return nil
}

// SetLag records how far group g's log time was behind this member's wall
// clock when its leader last answered, in ns (negative: ahead).
func (r *Router) SetLag(g int, lag int64) { r.lags[g].Store(lag) }

// Lag is group g's lag as last recorded, if ever.
func (r *Router) Lag(g int) (int64, bool) {
	v := r.lags[g].Load()
	return v, v != math.MinInt64
}

// OwnedRanges are the slot ranges of this member's group, as SLUICE.OWN
// takes them.
func (r *Router) OwnedRanges() []string {
	var out []string
	for _, rg := range r.Map().Groups[r.self].Ranges {
		out = append(out, fmt.Sprintf("%d-%d", rg.From, rg.To))
	}
	return out
}

// claim is what a group was last learned to own.
type claim struct {
	epoch uint64
	bits  [slot.Count / 64]uint64
}

func (c *claim) has(s int) bool { return c.bits[s/64]&(1<<(s%64)) != 0 }

// ownerTable is the routing table the claims make.
type ownerTable struct {
	owner [slot.Count]uint16
	// epoch is the highest epoch claimed (CLUSTER INFO's current epoch).
	epoch uint64
	// conflicts are the slots two groups claim at one epoch, the highest
	// that claims them (see Conflict); nil when there are none.
	conflicts []Conflict
}

// Claim records that group g owns ranges (From-To pairs) at epoch, as its
// log says. A claim older than g's last is ignored; it reports whether
// the routing changed.
func (r *Router) Claim(g int, epoch uint64, ranges [][2]int) bool {
	var c claim
	c.epoch = epoch
	for _, rg := range ranges {
		for s := rg[0]; s <= rg[1]; s++ {
			c.bits[s/64] |= 1 << (s % 64)
		}
	}
	return r.apply(g, func(cur *claim) bool {
		if epoch < cur.epoch || (epoch == cur.epoch && c.bits == cur.bits) {
			return false
		}
		*cur = c
		return true
	})
}

// Moved records that group g took ranges at epoch, before its full claim
// is learned (the member that moved them knows first).
func (r *Router) Moved(g int, epoch uint64, ranges [][2]int) bool {
	return r.apply(g, func(cur *claim) bool {
		cur.epoch = max(cur.epoch, epoch)
		for _, rg := range ranges {
			for s := rg[0]; s <= rg[1]; s++ {
				cur.bits[s/64] |= 1 << (s % 64)
			}
		}
		return true
	})
}

// apply changes g's claim by fn and rebuilds the table when it changed.
func (r *Router) apply(g int, fn func(*claim) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !fn(&r.claims[g]) {
		return false
	}
	r.rebuild()
	return true
}

// rebuild makes the routing table from the claims (r.mu held).
func (r *Router) rebuild() {
	old := r.table.Load()
	t := &ownerTable{owner: old.owner}
	for _, c := range r.claims {
		t.epoch = max(t.epoch, c.epoch)
	}
	groups := r.m.Load().Groups
	for s := range slot.Count {
		best, bestEpoch, tied := -1, uint64(0), -1
		for i := range r.claims {
			if !r.claims[i].has(s) || (i < len(groups) && groups[i].Removed) {
				continue
			}
			switch e := r.claims[i].epoch; {
			case best < 0 || e > bestEpoch:
				best, bestEpoch, tied = i, e, -1
			case e == bestEpoch && tied < 0:
				tied = i
			}
		}
		if best >= 0 {
			t.owner[s] = uint16(best)
		}
		if tied >= 0 {
			t.conflicts = noteConflict(t.conflicts, s, best, tied, bestEpoch)
		}
	}
	r.table.Store(t)
}

// Conflict is a run of slots two groups claim at one epoch: a cluster map
// rewritten with another split at the same epoch (a member started with
// it), never a migration, whose every step claims at a later epoch. Which
// of the two owns them is unknowable, so neither may decide for them
// until one claims them at a later epoch (or the other is removed).
type Conflict struct {
	From, To int
	// A, B are the two groups' indexes (A < B), Epoch what both claim.
	A, B  int
	Epoch uint64
}

// noteConflict adds slot s, claimed by groups a and b at epoch, to the
// runs in cs.
func noteConflict(cs []Conflict, s, a, b int, epoch uint64) []Conflict {
	if n := len(cs); n > 0 {
		if c := &cs[n-1]; c.To == s-1 && c.A == a && c.B == b && c.Epoch == epoch {
			c.To = s
			return cs
		}
	}
	return append(cs, Conflict{From: s, To: s, A: a, B: b, Epoch: epoch})
}

// Conflict reports whether two groups claim slot s at one epoch, and
// which.
func (r *Router) Conflict(s int) (Conflict, bool) {
	for _, c := range r.table.Load().conflicts {
		if c.From <= s && s <= c.To {
			return c, true
		}
	}
	return Conflict{}, false
}

// Conflicts are every run of slots two groups claim at one epoch (nil:
// none).
func (r *Router) Conflicts() []Conflict { return r.table.Load().conflicts }

// Describe says c for people: "slots 10922-16383 are claimed by groups
// g2 and g3 at epoch 1".
func (r *Router) Describe(c Conflict) string {
	m := r.Map()
	return fmt.Sprintf("slots %s are claimed by groups %s and %s at epoch %d",
		Range{c.From, c.To}, m.Groups[c.A].ID, m.Groups[c.B].ID, c.Epoch)
}

// Epoch is the highest epoch any group claims.
func (r *Router) Epoch() uint64 { return r.table.Load().epoch }

// Owner is the group slot s is routed to: this member's own group when its
// log owns s, else the group whose claim of s has the highest epoch.
func (r *Router) Owner(s int) int {
	if g := int(r.table.Load().owner[s]); g == r.self || r.ownLog == nil || !r.ownLog(s) {
		return g
	}
	return r.self
}

// Ranges are the slots routed to group g, as sorted ranges; a slot two
// groups claim at one epoch (Conflict) is no group's.
func (r *Router) Ranges(g int) [][2]int {
	var out [][2]int
	routed := func(s int) bool {
		if r.Owner(s) != g {
			return false
		}
		_, conflict := r.Conflict(s)
		return !conflict
	}
	for s := 0; s < slot.Count; s++ {
		if !routed(s) {
			continue
		}
		from := s
		for s+1 < slot.Count && routed(s+1) {
			s++
		}
		out = append(out, [2]int{from, s})
	}
	return out
}

// GroupIndex is the index of the group named id.
func (r *Router) GroupIndex(id string) (int, bool) {
	m := r.Map()
	for i := range m.Groups {
		if m.Groups[i].ID == id {
			return i, true
		}
	}
	return -1, false
}
