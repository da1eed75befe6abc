package member

import (
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/memberpb"
)

// wireReasons are machine.Reason's codes on the wire, one row each.
var wireReasons = []struct {
	wire memberpb.Reason
	r    machine.Reason
}{
	{memberpb.Reason_REASON_UNSPECIFIED, machine.ReasonNone},
	{memberpb.Reason_REASON_INVALID, machine.ReasonInvalid},
	{memberpb.Reason_REASON_WRONG_TYPE, machine.ReasonWrongType},
	{memberpb.Reason_REASON_INTERNAL, machine.ReasonInternal},
	{memberpb.Reason_REASON_NOT_NOW, machine.ReasonNotNow},
	{memberpb.Reason_REASON_RULES_DIFFER, machine.ReasonRulesDiffer},
	{memberpb.Reason_REASON_OUT_OF_MEMORY, machine.ReasonOutOfMemory},
	{memberpb.Reason_REASON_UNKNOWN, machine.ReasonUnknown},
}

// reasonOnWire is r's code on the wire.
func reasonOnWire(r machine.Reason) memberpb.Reason {
	for _, w := range wireReasons {
		if w.r == r {
			return w.wire
		}
	}
	return memberpb.Reason_REASON_UNSPECIFIED
}

// reasonOf reads a reason off the wire: none for a code this version does
// not know (a newer member's), which a door takes as an outcome it cannot
// know.
func reasonOf(w memberpb.Reason) machine.Reason {
	for _, x := range wireReasons {
		if x.wire == w {
			return x.r
		}
	}
	return machine.ReasonNone
}
