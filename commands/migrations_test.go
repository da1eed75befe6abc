package commands

import (
	"strings"
	"testing"
)

// CLUSTER MIGRATESLOTS' blocks: ranges then a node, repeated; anything else
// is a syntax error or a named bad range.
func TestParseMigrateSlots(t *testing.T) {
	words := func(s string) [][]byte {
		var out [][]byte
		for _, f := range strings.Fields(s) {
			out = append(out, []byte(f))
		}
		return out
	}
	specs, bad := parseMigrateSlots(words("SLOTSRANGE 0 9 20 29 NODE a slotsrange 10 19 node b"))
	if bad != "" || len(specs) != 2 || specs[0].Node != "a" || len(specs[0].Ranges) != 2 || specs[0].Ranges[1] != [2]int{20, 29} ||
		specs[1].Node != "b" || specs[1].Ranges[0] != [2]int{10, 19} {
		t.Fatalf("%+v %q", specs, bad)
	}
	for in, want := range map[string]string{
		"SLOTSRANGE 0 9":                "syntax",
		"SLOTSRANGE 0 9 NODE":           "syntax",
		"SLOTSRANGE NODE a":             "syntax",
		"NODE a":                        "syntax",
		"SLOTSRANGE 0 x NODE a":         "syntax",
		"SLOTSRANGE 9 0 NODE a":         "invalid slot range 9 0",
		"SLOTSRANGE 0 16384 NODE a":     "invalid slot range 0 16384",
		"SLOTSRANGE -1 3 NODE a":        "invalid slot range -1 3",
		"SLOTSRANGE 0 9 NODE a EXTRA 1": "syntax",
	} {
		if _, bad := parseMigrateSlots(words(in)); !strings.Contains(bad, want) {
			t.Errorf("%q: %q, want %q", in, bad, want)
		}
	}
}
