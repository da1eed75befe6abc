package robust

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Outcome is what a call's answer said.
type Outcome int

const (
	// Admitted: the call was charged (CL.THROTTLE's 0, RL.CHECK's 0…).
	Admitted Outcome = iota
	// Refused: over the limit; nothing was charged.
	Refused
	// NotApplied: the server said nothing was applied (TRYAGAIN,
	// CLUSTERDOWN, MOVED, LOADING).
	NotApplied
	// Unknown: no answer, or one that says the outcome is not known.
	Unknown
	// Read: the final read of what is left (Input.Remaining).
	Read
	// Returned: charged, then given back (a reservation cancelled, the
	// cancel answered): nothing is left charged (Ledger only).
	Returned
)

func (o Outcome) String() string {
	return [...]string{"admitted", "refused", "not-applied", "unknown", "read", "returned"}[o]
}

// Input is one call: the key it charges, how many units, and for a read
// what it found left.
type Input struct {
	Key       string
	Units     int64
	Remaining int64
	// Slack is how many units more than were charged a read or a refusal
	// may find spent: a GCRA key's state is a time (its theoretical
	// arrival time), so where its slot moves to a group whose log's time
	// is behind the one that charged it, it reads as up to one emission
	// interval — a unit — more spent, until that group's time catches up
	// (the conservative side: never fewer spent).
	Slack int64
}

// Budget is the model of a key that admits Limit units in the run, then
// refuses.
func Budget(limit int64) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: byKey,
		Init:      func() []interface{} { return []interface{}{limit} },
		Step: func(state, input, output interface{}) []interface{} {
			left, in, out := state.(int64), input.(Input), output.(Outcome)
			switch out {
			case Admitted:
				if left >= in.Units {
					return []interface{}{left - in.Units}
				}
			case Refused:
				if left < in.Units+in.Slack {
					return []interface{}{left}
				}
			case NotApplied:
				return []interface{}{left}
			case Unknown:
				if left >= in.Units {
					return []interface{}{left, left - in.Units}
				}
				return []interface{}{left}
			case Read:
				if in.Remaining <= left && in.Remaining >= left-in.Slack {
					return []interface{}{left}
				}
			}
			return nil
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(Input), output.(Outcome)
			if out == Read {
				return fmt.Sprintf("%s: %d left", in.Key, in.Remaining)
			}
			return fmt.Sprintf("%s -%d: %s", in.Key, in.Units, out)
		},
		DescribeState: func(state interface{}) string { return fmt.Sprintf("%d left", state.(int64)) },
	}
	return nm.ToModel()
}

// byKey partitions a history by key: keys are independent.
func byKey(history []porcupine.Operation) [][]porcupine.Operation {
	parts := map[string][]porcupine.Operation{}
	for _, op := range history {
		k := op.Input.(Input).Key
		parts[k] = append(parts[k], op)
	}
	keys := make([]string, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a fixed order: a failure names the same key each time
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, parts[k])
	}
	return out
}

// Summaries count each key's outcomes, for a report: one line a key, in
// key order.
func Summaries(history []porcupine.Operation) string {
	counts := map[string]*[Read + 1]int{}
	for _, op := range history {
		k := op.Input.(Input).Key
		c := counts[k]
		if c == nil {
			c = &[Read + 1]int{}
			counts[k] = c
		}
		c[op.Output.(Outcome)]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + ":")
		for o := Admitted; o <= Read; o++ {
			fmt.Fprintf(&b, " %s=%d", o, counts[k][o])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// IllegalKeys are the keys whose histories model does not accept, each
// checked alone (within timeout): where a failed check's report should
// look. A key whose check timed out is listed with " (timed out)".
func IllegalKeys(model porcupine.Model, history []porcupine.Operation, timeout time.Duration) []string {
	var out []string
	for _, part := range byKey(history) {
		switch porcupine.CheckOperationsTimeout(model, part, timeout) {
		case porcupine.Illegal:
			out = append(out, part[0].Input.(Input).Key)
		case porcupine.Unknown:
			out = append(out, part[0].Input.(Input).Key+" (timed out)")
		}
	}
	return out
}

// KeyHistory is a key's calls in the order they were made, one a line:
// invoked and answered (seconds into the run), the outcome, the units or
// what a read found left.
func KeyHistory(history []porcupine.Operation, key string) string {
	var ops []porcupine.Operation
	for _, op := range history {
		if op.Input.(Input).Key == key {
			ops = append(ops, op)
		}
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	var b strings.Builder
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Outcome)
		what := fmt.Sprintf("-%d", in.Units)
		if out == Read {
			what = fmt.Sprintf("%d left", in.Remaining)
		}
		fmt.Fprintf(&b, "  %9.3fs %9.3fs client %d %-11s %s\n", time.Duration(op.Call).Seconds(), time.Duration(op.Return).Seconds(), op.ClientId, out, what)
	}
	return b.String()
}
