package machine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-rl/sluice/resp"
)

// Whatever an apply returns in its Outcome is its caller's: a later apply
// with the same Scratch (the apply loop's, one per member) leaves a
// settle's rows, a decision's statuses and a transaction's boundaries as
// they were. The member channel reads them on another goroutine while the
// loop applies the next entry; a slice into the scratch would answer one
// caller with another's rows.
func TestOutcomesOutliveTheNextApply(t *testing.T) {
	m := New(Options{})
	if got := do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := do(m, t0, "RL.RULES", "LOAD", "another.yaml", rlsRules); got != "+OK\r\n" {
		t.Fatal(got)
	}
	var sc Scratch
	apply := func(args ...string) Outcome {
		b := make([][]byte, len(args))
		for i, a := range args {
			b[i] = []byte(a)
		}
		var w resp.Writer
		return m.ApplyArgsScratch(&sc, t0+1, b, &w)
	}
	for i := range 2 {
		apply("RL.RESERVE", "llm", fmt.Sprint("r", i), "60", "COST", fmt.Sprint(10*(i+1)), "DESCRIPTOR", "fixed", "a", "DESCRIPTOR", "quota", "a")
	}
	first := apply("RL.SETTLE", "llm", "r0", "3")
	rows := slices.Clone(first.Settled)
	if len(rows) != 2 || rows[0].Reserved != 10 || rows[0].Actual != 3 {
		t.Fatalf("settle r0: %+v", rows)
	}
	second := apply("RL.SETTLE", "llm", "r1", "25")
	if !slices.Equal(first.Settled, rows) {
		t.Fatalf("r0's rows became %+v after settling r1 (%+v): they were %+v", first.Settled, second.Settled, rows)
	}

	a := apply("RL.SHOULDRATELIMIT", "another", "1", "1", "-", "-", "-", "key2", "alice")
	statuses := slices.Clone(a.Statuses)
	if len(statuses) != 1 {
		t.Fatalf("statuses: %+v (%s)", statuses, a.Err)
	}
	apply("RL.SHOULDRATELIMIT", "another", "1", "1", "-", "-", "-", "key3", "bob", "1", "-", "-", "-", "free", "carol")
	if !slices.Equal(a.Statuses, statuses) {
		t.Fatalf("alice's statuses became %+v after the next decision: they were %+v", a.Statuses, statuses)
	}

	tx := apply("EXEC", "0", "5", "CL.THROTTLE", "{a}k", "1", "1", "60")
	parts := slices.Clone(tx.Parts)
	apply("EXEC", "0", "5", "CL.THROTTLE", "{a}k", "1", "1", "60", "1", "DBSIZE", "1", "DBSIZE")
	if !slices.Equal(tx.Parts, parts) {
		t.Fatalf("a transaction's parts became %v after the next: they were %v", tx.Parts, parts)
	}
}
