package shardmap

import (
	"fmt"
	"strconv"
	"strings"
)

// Format writes the live map as Parse reads it: the highest epoch claimed,
// and each group (removed ones left out) with the slots it is routed, the
// epoch of its claim and its members. A member joining a running cluster
// (--cluster-join) starts from it.
func (r *Router) Format() []byte {
	m := r.Map()
	var b strings.Builder
	fmt.Fprintf(&b, "epoch: %d\ngroups:\n", max(r.Epoch(), 1))
	for g := range m.Groups {
		grp := &m.Groups[g]
		if grp.Removed {
			continue
		}
		var slots, members []string
		for _, rg := range r.Ranges(g) {
			slots = append(slots, strconv.Quote(Range{rg[0], rg[1]}.String()))
		}
		for _, p := range grp.Members {
			members = append(members, fmt.Sprintf("%s: %q", p.ID, p.ClientAddr+"@"+p.RaftAddr))
		}
		fmt.Fprintf(&b, "  - id: %s\n    epoch: %d\n    slots: [%s]\n    members: {%s}\n",
			grp.ID, max(r.ClaimEpoch(g), 1), strings.Join(slots, ", "), strings.Join(members, ", "))
	}
	return []byte(b.String())
}
