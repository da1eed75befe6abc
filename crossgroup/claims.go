package crossgroup

import (
	"context"
	"sync"
	"time"
)

// refreshEvery bounds how often RefreshClaims asks the groups (refusals
// come in bursts while a chunk moves).
const refreshEvery = 20 * time.Millisecond

// RefreshClaims asks every other group's leader which slots its log owns
// (member.Report) and gives the router what they say, at most once per
// refreshEvery. The leader probe does the same every 250 ms; a part a
// group's fence refused should not wait for it.
func (c *Coordinator) RefreshClaims(ctx context.Context) {
	now := time.Now().UnixNano()
	last := c.refreshed.Load()
	if now-last < int64(refreshEvery) || !c.refreshed.CompareAndSwap(last, now) {
		return
	}
	r := c.cfg.Router
	if o := c.cfg.Machine.Owned(); o != nil {
		r.Claim(r.Self(), o.Epoch, o.SlotRanges())
	}
	if c.cfg.ReportOf == nil {
		return
	}
	// A group that does not answer keeps its last claim.
	var wg sync.WaitGroup
	m := r.Map()
	for g := range m.Groups {
		if g == r.Self() || m.Groups[g].Removed {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rep, err := c.cfg.ReportOf(ctx, g); err == nil && rep.Fenced {
				r.Claim(g, rep.Slots.Epoch, rep.Slots.Ranges)
			}
		}()
	}
	wg.Wait()
}
