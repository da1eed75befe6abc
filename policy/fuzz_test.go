package policy

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser: it must return a domain
// or an *Error, never panic, and a domain it returns must match without
// panicking.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/envoy/*.yaml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    value: x*y\n    share_threshold: true\n    rate_limit: {unit: hour, requests_per_unit: 3, sluice: {algorithm: quota, zone: Asia/Tokyo, anchor: 2026-01-31T00:00:00Z}}\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse("f.yaml", data)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			return
		}
		for _, r := range d.Rules {
			_ = r.AppendKey(nil, []Entry{{"a", "xzy"}})
		}
		d.Match([]Entry{{"a", "x"}, {"b", ""}})
		d.Match([]Entry{{"a", "xqqy"}})
	})
}
