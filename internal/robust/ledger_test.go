package robust

import (
	"strings"
	"testing"
)

// The ledger on hand-made histories of two counters of a budget of 2,
// charged together: what a correct limiter may answer passes; each way a
// limiter can be wrong fails, naming the counter.
func TestLedger(t *testing.T) {
	both := []string{"a", "b"}
	call := func(o Outcome, keys ...string) Call { return Call{Keys: keys, Units: 1, Outcome: o} }
	for _, c := range []struct {
		name  string
		calls []Call
		spent map[string]int64
		want  string // "" passes; else a word of the violation
	}{
		{"two admitted, then refused", []Call{call(Admitted, both...), call(Admitted, both...), call(Refused, both...)},
			map[string]int64{"a": 2, "b": 2}, ""},
		{"refused by one counter, the other kept whole", []Call{call(Admitted, "a"), call(Admitted, "a"), call(Refused, both...)},
			map[string]int64{"a": 2, "b": 0}, ""},
		{"an unknown that charged, one that did not", []Call{call(Unknown, both...), call(Unknown, "a"), call(Admitted, "a")},
			map[string]int64{"a": 2, "b": 1}, ""},
		{"TRYAGAIN charged nothing", []Call{call(NotApplied, both...), call(Admitted, both...)},
			map[string]int64{"a": 1, "b": 1}, ""},
		{"refused, then a reservation's unit given back", []Call{call(Returned, both...), call(Admitted, both...), call(Refused, both...)},
			map[string]int64{"a": 1, "b": 1}, ""},

		{"one admission past the limit", []Call{call(Admitted, both...), call(Admitted, both...), call(Admitted, both...)},
			map[string]int64{"a": 2, "b": 2}, "admitted of a limit"},
		{"a refused check kept a part's charge", []Call{call(Admitted, "a"), call(Admitted, "a"), call(Refused, both...)},
			map[string]int64{"a": 2, "b": 1}, "no answer accounts"},
		{"a refusal with budget left", []Call{call(Admitted, both...), call(Refused, both...)},
			map[string]int64{"a": 1, "b": 1}, "budget left"},
		{"a lost charge", []Call{call(Admitted, both...), call(Admitted, both...)},
			map[string]int64{"a": 2, "b": 1}, "charge lost"},
		{"a cancel answered that did not give back", []Call{call(Returned, both...)},
			map[string]int64{"a": 1, "b": 0}, "no answer accounts"},
		{"a charge after TRYAGAIN", []Call{call(NotApplied, both...)},
			map[string]int64{"a": 1, "b": 1}, "no answer accounts"},
		{"a counter not read", []Call{call(Admitted, both...)},
			map[string]int64{"a": 1}, "not read"},
	} {
		l := &Ledger{Limits: map[string]int64{"a": 2, "b": 2}}
		for _, x := range c.calls {
			l.Add(x)
		}
		v := l.Check(c.spent)
		switch {
		case c.want == "" && len(v) > 0:
			t.Errorf("%s: %v, want none", c.name, v)
		case c.want != "" && (len(v) == 0 || !strings.Contains(v[0].What, c.want)):
			t.Errorf("%s: %v, want %q", c.name, v, c.want)
		}
	}
}
