package shardmap

import (
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/slot"
)

// Report is what a member's INFO cluster says of its group's slots, which
// the other groups' members route by: the slots its log owns and at which
// epoch (sluice_slots_epoch, sluice_slots), and those its running
// migrations are moving out, by target group (sluice_migrating).
type Report struct {
	Epoch     uint64
	Ranges    [][2]int
	Migrating map[string][][2]int
}

// ParseReport reads a Report from an INFO cluster reply; ok is false when
// the member says nothing of slots (its group is not fenced yet).
func ParseReport(info string) (r Report, ok bool) {
	var epoch, slots bool
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "sluice_slots_epoch":
			e, err := strconv.ParseUint(v, 10, 64)
			r.Epoch, epoch = e, err == nil
		case "sluice_slots":
			r.Ranges, slots = slot.ParseRanges(v)
		case "sluice_migrating":
			r.Migrating = parseMigrating(v)
		}
	}
	return r, epoch && slots
}

// FormatMigrating writes Report.Migrating as sluice_migrating does:
// "0-99,200-299>g2;…", in target order.
func FormatMigrating(m map[string][][2]int) string {
	parts := make([]string, 0, len(m))
	for target, rs := range m {
		parts = append(parts, slot.FormatRanges(rs)+">"+target)
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

func parseMigrating(v string) map[string][][2]int {
	var out map[string][][2]int
	for _, part := range strings.Split(v, ";") {
		rs, target, ok := strings.Cut(part, ">")
		ranges, okr := slot.ParseRanges(rs)
		if !ok || !okr || target == "" {
			continue
		}
		if out == nil {
			out = map[string][][2]int{}
		}
		out[target] = append(out[target], ranges...)
	}
	return out
}
