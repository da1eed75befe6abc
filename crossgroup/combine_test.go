package crossgroup

import (
	"testing"

	"github.com/sluice-rl/sluice/machine"
)

func partWith(r machine.CheckResult) *part { return &part{res: machine.PartResult{Check: r}} }

// An admitted check across groups answers with its tightest limit (the
// least remaining), a refused one with the refusal that waits longest
// (never above all); parts no limit applies to say nothing.
func TestCombine(t *testing.T) {
	unlimited := machine.CheckResult{Limit: -1, Remaining: -1, RetryAfter: -1}
	allowed := []*part{
		partWith(machine.CheckResult{Limit: 10, Remaining: 5, RetryAfter: -1}),
		partWith(unlimited),
		partWith(machine.CheckResult{Limit: 20, Remaining: 2, RetryAfter: -1}),
		partWith(machine.CheckResult{Limit: 30, Remaining: 9, RetryAfter: -1}),
	}
	if got := combine(allowed, false); got.Remaining != 2 || got.Limit != 20 {
		t.Fatalf("admitted: %+v, want the part with 2 remaining", got)
	}
	refused := []*part{
		partWith(machine.CheckResult{Limited: true, Limit: 10, RetryAfter: 10}),
		partWith(machine.CheckResult{Limit: 20, Remaining: 3, RetryAfter: -1}), // this one allowed
		partWith(machine.CheckResult{Limited: true, Limit: 30, RetryAfter: 30}),
	}
	if got := combine(refused, true); !got.Limited || got.RetryAfter != 30 {
		t.Fatalf("refused: %+v, want the refusal that waits 30", got)
	}
	refused = append(refused, partWith(machine.CheckResult{Limited: true, Limit: 5, RetryAfter: -1})) // never
	if got := combine(refused, true); got.RetryAfter != -1 || got.Limit != 5 {
		t.Fatalf("refused with a part that never passes: %+v", got)
	}
	if got := combine([]*part{partWith(unlimited)}, false); got != unlimited {
		t.Fatalf("nothing limited: %+v", got)
	}
}
