package shardmap

import (
	"fmt"
	"math"
	"sync/atomic"
)

// Router tells a member of one group where each slot's commands go: its
// own group, or another group's leader (the last one learned).
// It is safe for concurrent use.
type Router struct {
	m    *Map
	self int
	// leaders holds each group's last known leader client address ("":
	// unknown).
	leaders []atomic.Pointer[string]
	// lags holds each other group's lag behind this member's wall clock
	// as last measured, ns (math.MinInt64: never measured).
	lags []atomic.Int64
}

// NewRouter is the router of a member of group selfGroup.
func NewRouter(m *Map, selfGroup string) (*Router, error) {
	for i := range m.Groups {
		if m.Groups[i].ID == selfGroup {
			r := &Router{m: m, self: i, leaders: make([]atomic.Pointer[string], len(m.Groups)), lags: make([]atomic.Int64, len(m.Groups))}
			for g := range r.lags {
				r.lags[g].Store(math.MinInt64)
			}
			return r, nil
		}
	}
	return nil, fmt.Errorf("%w: no group %q", ErrMap, selfGroup)
}

// Map is the map routed by.
func (r *Router) Map() *Map { return r.m }

// Self is the index of this member's group.
func (r *Router) Self() int { return r.self }

// Route is where a command for slot s goes: mine when this member's group
// owns it, else the owner's leader's client address ("" while none is
// known).
func (r *Router) Route(s int) (addr string, mine bool) {
	g := int(r.m.owner[s])
	if g == r.self {
		return "", true
	}
	addr, _ = r.Leader(g)
	return addr, false
}

// SetLeader records group g's leader client address ("": none known).
func (r *Router) SetLeader(g int, addr string) { r.leaders[g].Store(&addr) }

// Leader is group g's last known leader client address, if any.
func (r *Router) Leader(g int) (string, bool) {
	if p := r.leaders[g].Load(); p != nil && *p != "" {
		return *p, true
	}
	return "", false
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
	for _, rg := range r.m.Groups[r.self].Ranges {
		out = append(out, fmt.Sprintf("%d-%d", rg.From, rg.To))
	}
	return out
}
