package commands

import (
	"time"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/shardmap"
	"github.com/sluice-rl/sluice/slot"
)

// ownJobViews are the views of this group's migrations from its own log
// (running, or ended and shown until a later instant than now).
func ownJobViews(o *machine.Ownership, now time.Time) []shardmap.JobView {
	if o == nil {
		return nil
	}
	var out []shardmap.JobView
	for _, j := range o.Jobs {
		v := shardmap.JobView{Target: j.TargetGroup, Ranges: j.Ranges}
		if j.State != machine.JobRunning {
			if j.ShowUntil == 0 {
				continue
			}
			v.Until = j.ShowUntil
		}
		if v.Shown(now) {
			out = append(out, v)
		}
	}
	return out
}

// jobViews are the views of group g's migrations still shown at now:
// this member's own group's from its log, another's as its leader last
// said.
func (c *Ctx) jobViews(g int, now time.Time) []shardmap.JobView {
	r := c.Env.Shards
	if g == r.Self() {
		return ownJobViews(c.Env.Machine.Owned(), now)
	}
	var out []shardmap.JobView
	for _, v := range r.JobViews(g) {
		if v.Shown(now) {
			out = append(out, v)
		}
	}
	return out
}

// shownOwners is the group every slot is shown with in CLUSTER NODES: its
// live owner, except that the slots of a migration still shown stay with
// the source (shardmap.JobView) — those of ended jobs first, then those of
// running jobs over them, as a running job is the newer.
func (c *Ctx) shownOwners(now time.Time) *[slot.Count]int {
	r := c.Env.Shards
	owner := new([slot.Count]int)
	for s := range owner {
		owner[s] = r.Owner(s)
		if _, conflict := r.Conflict(s); conflict {
			owner[s] = -1 // no group's: shown as no one's, so --cluster check fails
		}
	}
	m := r.Map()
	for _, running := range []bool{false, true} {
		for g := range m.Groups {
			if m.Groups[g].Removed {
				continue
			}
			for _, v := range c.jobViews(g, now) {
				if (v.Until == 0) != running {
					continue
				}
				for _, rg := range v.Ranges {
					for s := rg[0]; s <= rg[1]; s++ {
						owner[s] = g
					}
				}
			}
		}
	}
	return owner
}

// rangesOf are the slots owner gives group g, as sorted ranges.
func rangesOf(owner *[slot.Count]int, g int) [][2]int {
	var out [][2]int
	for s := 0; s < slot.Count; s++ {
		if owner[s] != g {
			continue
		}
		from := s
		for s+1 < slot.Count && owner[s+1] == g {
			s++
		}
		out = append(out, [2]int{from, s})
	}
	return out
}
