package crossgroup

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/slot"
)

// refreshEvery bounds how often RefreshClaims asks the groups (refusals
// come in bursts while a chunk moves).
const refreshEvery = 20 * time.Millisecond

// fenceRefusal reports a reply of a group's fence: a slot the group does
// not own (TRYAGAIN for one key, CROSSSLOT for a check's counters).
func fenceRefusal(msg string) bool {
	return strings.Contains(msg, "is not this group's") || strings.Contains(msg, "not all in this group's slots")
}

// RefreshClaims asks every other group's leader which slots its log owns
// (INFO cluster) and gives the router what they say, at most once per
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
	m := r.Map()
	var wg sync.WaitGroup
	for g := range m.Groups {
		if g == r.Self() || m.Groups[g].Removed {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
			defer cancel()
			v, err := c.call(ctx, g, "INFO", "cluster")
			if err != nil {
				return
			}
			info, _ := v.(string)
			var epoch uint64
			var ranges [][2]int
			known := 0
			for _, line := range strings.Split(info, "\r\n") {
				if e, ok := strings.CutPrefix(line, "sluice_slots_epoch:"); ok {
					if epoch, err = strconv.ParseUint(e, 10, 64); err == nil {
						known++
					}
				}
				if rs, ok := strings.CutPrefix(line, "sluice_slots:"); ok {
					if ranges, ok = slot.ParseRanges(rs); ok {
						known++
					}
				}
			}
			if known == 2 {
				r.Claim(g, epoch, ranges)
			}
		}()
	}
	wg.Wait()
}
