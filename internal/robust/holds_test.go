package robust

import (
	"strings"
	"testing"
)

// AtOnce on hand-made holds of a key of limit 2: holds that follow one
// another, or touch, pass; three that certainly overlap fail.
func TestAtOnce(t *testing.T) {
	hold := func(from, until int64) Hold { return Hold{Key: "k", From: from, Until: until} }
	for _, c := range []struct {
		name  string
		holds []Hold
		want  string
	}{
		{"two at once", []Hold{hold(0, 10), hold(5, 15)}, ""},
		{"three in a row", []Hold{hold(0, 10), hold(10, 20), hold(20, 30)}, ""},
		{"a third as one is released", []Hold{hold(0, 10), hold(5, 15), hold(10, 20)}, ""},
		{"released as answered", []Hold{hold(0, 10), hold(5, 15), hold(7, 7)}, ""},
		{"three at once", []Hold{hold(0, 10), hold(5, 15), hold(9, 20)}, "3 held at once"},
		{"one never released", []Hold{hold(0, 100), hold(5, 15), hold(20, 30), hold(25, 40)}, "3 held at once"},
	} {
		v := AtOnce(c.holds, map[string]int64{"k": 2})
		switch {
		case c.want == "" && len(v) > 0:
			t.Errorf("%s: %v, want none", c.name, v)
		case c.want != "" && (len(v) == 0 || !strings.Contains(v[0].What, c.want)):
			t.Errorf("%s: %v, want %q", c.name, v, c.want)
		}
	}
	if v := AtOnce([]Hold{hold(0, 10), hold(1, 10), hold(2, 10)}, nil); len(v) != 0 {
		t.Errorf("a key with no limit: %v", v)
	}
}
