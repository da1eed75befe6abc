package memsize

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "100": 100, "1k": 1000, "1kb": 1024, "100mb": 100 << 20, "2GB": 2 << 30, "3g": 3e9, "5m": 5e6, "7b": 7} {
		if got, ok := Parse(in); !ok || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5gb", "mb", "1tb", "99999999999gb", "1 gb x"} {
		if got, ok := Parse(in); ok {
			t.Errorf("Parse(%q) = %d, want refused", in, got)
		}
	}
}
