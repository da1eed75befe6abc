package shardmap

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/slot"
)

// ProbeEvery is how often a member asks the other groups' members for
// their leader and their slots (the router's claims and JobViews).
const ProbeEvery = 250 * time.Millisecond

// JobViewSettle is how long the members take to learn that a migration
// started or ended (a few probes). The driver cuts a job's first chunk no
// sooner after the job is logged, and an ended job's slots are still
// shown as the source's until this long after its end: so CLUSTER NODES
// agrees on every member throughout a move (see JobView).
const JobViewSettle = 4 * ProbeEvery

// JobView is what CLUSTER NODES shows of one migration: its slots stay
// the source group's, as Valkey's atomic slot migration shows them, from
// the job's start until Until, although the chunks change owner one by
// one (CLUSTER SLOTS, SHARDS and every redirect follow the live owners).
// A chunk moves every few milliseconds, far faster than members learn of
// it; a job starts and ends once, and every member switches at the same
// wall-clock instant, so redis-cli --cluster check finds the members
// agreeing while chunks move.
type JobView struct {
	// Target is the group the slots go to.
	Target string
	// Ranges are all the job's slots, moved or not.
	Ranges [][2]int
	// Until is the Unix ms until which an ended job is still shown (0:
	// the job is running).
	Until int64
}

// Shown reports whether the view still holds at now.
func (v JobView) Shown(now time.Time) bool { return v.Until == 0 || now.UnixMilli() < v.Until }

// Report is what a member says of its group's slots, which the other
// groups' members route by (member.Report carries it): the slots its log
// owns and at which epoch, and the views of its migrations. INFO cluster
// shows people the same (sluice_slots_epoch, sluice_slots,
// sluice_migrating).
type Report struct {
	Epoch  uint64
	Ranges [][2]int
	Jobs   []JobView
}

// FormatJobViews writes views as sluice_migrating does: one
// "<ranges>><target>" per running job, "<ranges>><target>@<until-ms>" per
// ended one still shown, joined by ";" in a fixed order.
func FormatJobViews(views []JobView) string {
	parts := make([]string, 0, len(views))
	for _, v := range views {
		p := slot.FormatRanges(v.Ranges) + ">" + v.Target
		if v.Until != 0 {
			p += "@" + strconv.FormatInt(v.Until, 10)
		}
		parts = append(parts, p)
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}
