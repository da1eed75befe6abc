package robust

import (
	"fmt"
	"sort"
)

// A Ledger checks calls that charge several counters at once, all or
// nothing (RL.CHECK with descriptors in two groups, RL.RESERVE across
// groups), where a per-key linearization does not apply: porcupine's
// partitions are keys, and such a call joins them. It checks what a user
// can see instead, as invariants over the whole history and the final
// read of every counter, each a budget (Limits) that does not refill
// within a run:
//
//   - every admitted charge is present: spent ≥ admitted;
//   - nothing charged that no answer accounts for: spent ≤ admitted +
//     unknown (a refusal, TRYAGAIN, CLUSTERDOWN or MOVED charged nothing);
//   - no admission past the limit: admitted ≤ limit;
//   - a refusal had a reason: one of its counters is spent to within its
//     units at the end, but for what was given back (a budget that does
//     not refill stays spent).
type Ledger struct {
	// Limits are each counter's budget, by key.
	Limits map[string]int64
	calls  []Call
}

// Call is one call: the counters it charges Units each, and its outcome
// (Admitted, Refused, NotApplied, Unknown, Returned).
type Call struct {
	Keys    []string
	Units   int64
	Outcome Outcome
	// What says the call for a report (its command, who made it, its
	// answers); Call and Return are its invoke and return instants.
	What         string
	Call, Return int64
}

// Add records a call.
func (l *Ledger) Add(c Call) { l.calls = append(l.calls, c) }

// Calls is how many calls were recorded.
func (l *Ledger) Calls() int { return len(l.calls) }

// Violation is an invariant the history breaks, on one counter.
type Violation struct {
	Key  string
	What string
}

func (v Violation) String() string { return v.Key + ": " + v.What }

// Check checks the calls against spent, each counter's units spent as read
// once the faults were healed; a counter no call charged may be missing.
func (l *Ledger) Check(spent map[string]int64) []Violation {
	type tally struct{ admitted, unknown, returned int64 }
	tallies := map[string]*tally{}
	at := func(k string) *tally {
		t := tallies[k]
		if t == nil {
			t = &tally{}
			tallies[k] = t
		}
		return t
	}
	for _, c := range l.calls {
		for _, k := range c.Keys {
			t := at(k) // every counter a call names is checked
			switch c.Outcome {
			case Admitted:
				t.admitted += c.Units
			case Unknown:
				t.unknown += c.Units
			case Returned:
				t.returned += c.Units
			}
		}
	}
	// A refusal's reason: a counter spent, when it came, to within the
	// refused units. What was spent then is at most what is spent at the
	// end and what was given back since (a cancel answered, or one whose
	// outcome is unknown).
	var out []Violation
	for _, c := range l.calls {
		if c.Outcome != Refused {
			continue
		}
		reason := false
		for _, k := range c.Keys {
			t := tallies[k]
			if s, ok := spent[k]; ok && s+t.returned+t.unknown+c.Units > l.Limits[k] {
				reason = true
			}
		}
		if !reason {
			out = append(out, Violation{Key: fmt.Sprint(c.Keys), What: "refused with budget left on every counter: " + c.What})
		}
	}
	keys := make([]string, 0, len(tallies))
	for k := range tallies {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t, s, limit := tallies[k], spent[k], l.Limits[k]
		if _, ok := spent[k]; !ok {
			out = append(out, Violation{Key: k, What: "not read after the faults"})
			continue
		}
		switch {
		case t.admitted > limit:
			out = append(out, Violation{Key: k, What: fmt.Sprintf("%d admitted of a limit of %d", t.admitted, limit)})
		case s < t.admitted:
			out = append(out, Violation{Key: k, What: fmt.Sprintf("a charge lost: %d spent, %d admitted", s, t.admitted)})
		case s > t.admitted+t.unknown:
			out = append(out, Violation{Key: k, What: fmt.Sprintf("a charge no answer accounts for: %d spent, %d admitted + %d unknown", s, t.admitted, t.unknown)})
		}
	}
	return out
}

// History is the calls that charged key, in the order recorded, for a
// report.
func (l *Ledger) History(key string) []Call {
	var out []Call
	for _, c := range l.calls {
		for _, k := range c.Keys {
			if k == key {
				out = append(out, c)
			}
		}
	}
	return out
}

// Summary counts a counter's outcomes, for a report.
func (l *Ledger) Summary(key string) string {
	counts := map[Outcome]int{}
	for _, c := range l.calls {
		for _, k := range c.Keys {
			if k == key {
				counts[c.Outcome]++
			}
		}
	}
	return fmt.Sprintf("admitted=%d refused=%d not-applied=%d unknown=%d returned=%d", counts[Admitted], counts[Refused], counts[NotApplied], counts[Unknown], counts[Returned])
}
