package robust

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// op is a call of one unit on key k from call to ret with outcome o.
func op(client int, k string, call, ret int64, o Outcome) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: Input{Key: k, Units: 1}, Call: call, Output: o, Return: ret}
}

// read is the final read of key k finding left.
func read(k string, at int64, left int64) porcupine.Operation {
	return porcupine.Operation{ClientId: 9, Input: Input{Key: k, Remaining: left}, Call: at, Output: Read, Return: at + 1}
}

// slack gives op a slack of one unit (Input.Slack).
func slack(op porcupine.Operation) porcupine.Operation {
	in := op.Input.(Input)
	in.Slack = 1
	op.Input = in
	return op
}

// The checker on hand-made histories of a budget of 2: what a correct
// limiter may answer passes; each way a limiter can be wrong fails.
func TestBudgetModel(t *testing.T) {
	never := int64(math.MaxInt64)
	for _, c := range []struct {
		name    string
		history []porcupine.Operation
		ok      bool
	}{
		{"two admitted, then refused", []porcupine.Operation{
			op(0, "k", 0, 10, Admitted), op(1, "k", 5, 15, Admitted), op(0, "k", 20, 30, Refused), read("k", 40, 0)}, true},
		{"concurrent: the refusal may come first in time", []porcupine.Operation{
			op(0, "k", 0, 100, Admitted), op(1, "k", 0, 100, Refused), op(2, "k", 0, 100, Admitted), read("k", 200, 0)}, true},
		{"an unknown that charged", []porcupine.Operation{
			op(0, "k", 0, never, Unknown), op(1, "k", 5, 15, Admitted), op(1, "k", 20, 30, Refused), read("k", 40, 0)}, true},
		{"an unknown that did not", []porcupine.Operation{
			op(0, "k", 0, never, Unknown), op(1, "k", 5, 15, Admitted), read("k", 40, 1)}, true},
		{"TRYAGAIN charged nothing", []porcupine.Operation{
			op(0, "k", 0, 10, NotApplied), op(1, "k", 20, 30, Admitted), read("k", 40, 1)}, true},
		{"keys apart", []porcupine.Operation{
			op(0, "a", 0, 10, Admitted), op(0, "a", 10, 20, Admitted), op(1, "b", 0, 10, Admitted), op(1, "b", 10, 20, Admitted),
			read("a", 30, 0), read("b", 30, 0)}, true},

		{"one admission past the limit", []porcupine.Operation{
			op(0, "k", 0, 10, Admitted), op(0, "k", 20, 30, Admitted), op(0, "k", 40, 50, Admitted)}, false},
		{"a refusal with budget left (a lost charge's mirror)", []porcupine.Operation{
			op(0, "k", 0, 10, Admitted), op(0, "k", 20, 30, Refused)}, false},
		{"a slack of one: a read finds one more spent", []porcupine.Operation{
			op(0, "k", 0, 10, Admitted), slack(read("k", 20, 0)), read("k", 40, 1)}, true},
		{"a slack of one: a refusal with one left", []porcupine.Operation{
			op(0, "k", 0, 10, Admitted), slack(op(0, "k", 20, 30, Refused)), op(0, "k", 40, 50, Admitted)}, true},
		{"a slack of one, two more spent", []porcupine.Operation{
			slack(read("k", 20, 0))}, false},
		{"a slack is never a lost charge", []porcupine.Operation{
			op(0, "k", 0, 10, Admitted), slack(read("k", 40, 2))}, false},
		{"a lost charge: the read finds less spent than admitted", []porcupine.Operation{
			op(0, "k", 0, 10, Admitted), op(0, "k", 20, 30, Admitted), read("k", 40, 1)}, false},
		{"an unknown-less extra charge", []porcupine.Operation{
			op(0, "k", 0, 10, Admitted), read("k", 40, 0)}, false},
		{"a charge after TRYAGAIN", []porcupine.Operation{
			op(0, "k", 0, 10, NotApplied), op(0, "k", 20, 30, Admitted), read("k", 40, 0)}, false},
	} {
		res, _ := porcupine.CheckOperationsVerbose(Budget(2), c.history, 10*time.Second)
		if (res == porcupine.Ok) != c.ok {
			t.Errorf("%s: %s, want ok=%v", c.name, res, c.ok)
		}
	}
}

// IllegalKeys names the key the model rejects, and only it; KeyHistory
// lists that key's calls in call order.
func TestIllegalKeysNamesTheKey(t *testing.T) {
	history := []porcupine.Operation{
		op(0, "a", 0, 10, Admitted), op(0, "a", 10, 20, Admitted), read("a", 30, 0),
		op(1, "b", 40, 50, Admitted), op(1, "b", 0, 10, Admitted), op(1, "b", 20, 30, Admitted),
		op(2, "c", 0, 10, Admitted), read("c", 30, 0),
	}
	got := IllegalKeys(Budget(2), history, time.Second)
	if len(got) != 2 || got[0] != "b" || got[1] != "c" {
		t.Fatalf("illegal keys %q, want [b c]", got)
	}
	h := KeyHistory(history, "b")
	if n := strings.Count(h, "\n"); n != 3 {
		t.Fatalf("b's history has %d lines:\n%s", n, h)
	}
	first, _, _ := strings.Cut(h, "\n")
	if !strings.Contains(first, "0.000s") || strings.Contains(h, "client 0") {
		t.Fatalf("b's history not in call order, or not b's alone:\n%s", h)
	}
}
