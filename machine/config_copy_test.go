package machine

import (
	"strings"
	"testing"
)

// SLUICE.CONFIG makes another group's configuration this one's: its rules
// (replacing these), its overrides and scales (these dropped), so a check
// decides alike in both; the payload must match its digest and hold
// configuration only.
func TestConfigCopy(t *testing.T) {
	src, dst := New(Options{}), New(Options{})
	do(src, t0, "RL.RULES", "LOAD", "api.yaml", reserveRules)
	do(src, t0, "RL.OVERRIDE", "SET", "llm", "7", "day", "DESCRIPTOR", "fixed", "vip")
	do(src, t0, "RL.SCALE", "SET", "llm", "0.5")
	do(dst, t0, "RL.OVERRIDE", "SET", "other", "3", "day", "DESCRIPTOR", "k", "v")
	do(src, t0, "CL.THROTTLE", "counter", "5", "5", "60") // not configuration
	exp, err := src.ExportConfig()
	if err != nil || exp.Keys != 3 {
		t.Fatalf("export: %d records, %v", exp.Keys, err)
	}
	if got := do(dst, t0+1, "SLUICE.CONFIG", exp.Digest, string(exp.Payload)); got != "+OK\r\n" {
		t.Fatalf("SLUICE.CONFIG: %q", got)
	}
	for _, c := range [][]string{{"RL.CHECK", "llm", "DESCRIPTOR", "fixed", "vip"}, {"RL.CHECK", "llm", "DESCRIPTOR", "fixed", "a"},
		{"RL.OVERRIDE", "LIST", "other"}, {"RL.RULES", "LIST"}} {
		if a, b := do(src, t0+2, c...), do(dst, t0+2, c...); a != b {
			t.Fatalf("%v: source %q, after the copy %q", c, a, b)
		}
	}
	if got := do(dst, t0+2, "EXISTS", "counter"); got != ":0\r\n" {
		t.Fatal("a counter came with the configuration")
	}
	if got := do(dst, t0+3, "SLUICE.CONFIG", exp.Digest, string(exp.Payload[1:])); !strings.Contains(got, "digest") {
		t.Fatalf("a payload not matching its digest: %q", got)
	}
	moved := moveOnceExport(t, src)
	if got := do(dst, t0+3, "SLUICE.CONFIG", moved.Digest, string(moved.Payload)); !strings.Contains(got, "not configuration") {
		t.Fatalf("counters as configuration: %q", got)
	}
}

// moveOnceExport is the export of every slot of m (its counters).
func moveOnceExport(t *testing.T, m *Machine) SlotExport {
	t.Helper()
	e, err := m.ExportSlots([][2]int{{0, 16383}})
	if err != nil || e.Keys == 0 {
		t.Fatalf("export: %d, %v", e.Keys, err)
	}
	return e
}
