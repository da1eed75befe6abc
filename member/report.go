package member

import (
	"github.com/sluice-rl/sluice/memberpb"
	"github.com/sluice-rl/sluice/shardmap"
	"github.com/sluice-rl/sluice/slot"
)

// Report is what a member knows of its group, as the other groups' members
// route by it (the probe) and a slot's mover reads a target's epoch.
type Report struct {
	// Leader: the member is its group's serving leader.
	Leader bool
	// LogTime is the time of the last entry its state machine applied
	// (Unix ns).
	LogTime int64
	// Fenced: the group's log owns slots, which Slots says; false before
	// its first ownership entry.
	Fenced bool
	Slots  shardmap.Report
	// Level is the highest apply level the member's binary supports
	// (machine.Level; 0 from a release before levels).
	Level uint32
}

func ranges(rs [][2]int) []*memberpb.SlotRange {
	out := make([]*memberpb.SlotRange, len(rs))
	for i, r := range rs {
		out[i] = &memberpb.SlotRange{From: uint32(r[0]), To: uint32(r[1])}
	}
	return out
}

func fromRanges(rs []*memberpb.SlotRange) [][2]int {
	out := make([][2]int, 0, len(rs))
	for _, r := range rs {
		from, to := int(r.GetFrom()), int(r.GetTo())
		if from > to || to >= slot.Count {
			continue // not a range: a newer or broken sender's
		}
		out = append(out, [2]int{from, to})
	}
	return out
}

// message is r on the wire.
func (r Report) message() *memberpb.MemberReport {
	m := &memberpb.MemberReport{Code: memberpb.Code_APPLIED, Leader: r.Leader, LogTimeNs: r.LogTime, Fenced: r.Fenced, ApplyLevel: r.Level}
	if r.Fenced {
		m.Epoch, m.Ranges = r.Slots.Epoch, ranges(r.Slots.Ranges)
		for _, j := range r.Slots.Jobs {
			m.Jobs = append(m.Jobs, &memberpb.JobView{Target: j.Target, Ranges: ranges(j.Ranges), UntilMs: j.Until})
		}
	}
	return m
}

// reportOf reads a report off the wire.
func reportOf(m *memberpb.MemberReport) Report {
	r := Report{Leader: m.GetLeader(), LogTime: m.GetLogTimeNs(), Fenced: m.GetFenced(), Level: m.GetApplyLevel()}
	if r.Fenced {
		r.Slots = shardmap.Report{Epoch: m.GetEpoch(), Ranges: fromRanges(m.GetRanges())}
		for _, j := range m.GetJobs() {
			if j.GetTarget() == "" {
				continue
			}
			r.Slots.Jobs = append(r.Slots.Jobs, shardmap.JobView{Target: j.GetTarget(), Ranges: fromRanges(j.GetRanges()), Until: j.GetUntilMs()})
		}
	}
	return r
}
