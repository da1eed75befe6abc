package crossgroup

import (
	"context"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/shardmap"
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
	// A group that does not answer keeps its last claim.
	infos, _ := c.everyOther(ctx, []any{"INFO", "cluster"}, "")
	for g, info := range infos {
		if rep, ok := shardmap.ParseReport(info); ok {
			r.Claim(g, rep.Epoch, rep.Ranges)
		}
	}
}
