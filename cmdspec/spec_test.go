package cmdspec

import "testing"

func TestHasFlag(t *testing.T) {
	s := Spec{Name: "cl.throttle", Flags: []string{"write", "denyoom", "fast"}}
	for _, f := range []string{"write", "denyoom", "fast"} {
		if !s.HasFlag(f) {
			t.Errorf("HasFlag(%q) = false", f)
		}
	}
	for _, f := range []string{"readonly", "Write", ""} {
		if s.HasFlag(f) {
			t.Errorf("HasFlag(%q) = true", f)
		}
	}
}
