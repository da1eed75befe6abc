package policy

import (
	"strings"
	"testing"
)

// unit_multiplier (envoyproxy/ratelimit#190): a window of unit ×
// multiplier for every windowed algorithm; refused where it means nothing
// or cannot be.
func TestUnitMultiplier(t *testing.T) {
	parse := func(rateLimit string) (*Rule, error) {
		d, err := Parse("m.yaml", []byte("domain: m\ndescriptors:\n  - key: k\n    rate_limit: "+rateLimit+"\n"))
		if err != nil {
			return nil, err
		}
		return d.Rules[0], nil
	}
	for _, c := range []struct {
		rateLimit string
		window    int64
	}{
		{"{unit: second, unit_multiplier: 30, requests_per_unit: 5}", 30e9},
		{"{unit: minute, unit_multiplier: 5, requests_per_unit: 5, sluice: {algorithm: sliding}}", 300e9},
		{"{unit: hour, unit_multiplier: 2, requests_per_unit: 5, sluice: {algorithm: gcra}}", 7200e9},
		{"{unit: second, unit_multiplier: 1, requests_per_unit: 5}", 1e9},
		{"{unit: second, requests_per_unit: 5}", 1e9},
	} {
		r, err := parse(c.rateLimit)
		if err != nil || r.Window != c.window {
			t.Errorf("%s: window %v, err %v; want %d", c.rateLimit, r, err, c.window)
		}
	}
	for _, c := range []struct{ rateLimit, want string }{
		{"{unit: second, unit_multiplier: 0, requests_per_unit: 5}", "unit_multiplier"},
		{"{unit_multiplier: 3, requests_per_unit: 5, sluice: {period: 10s}}", "unit_multiplier needs a unit"},
		{"{unit: day, unit_multiplier: 2, requests_per_unit: 5, sluice: {algorithm: quota}}", "unit_multiplier must be 1"},
		{"{unit: year, unit_multiplier: 4294967295, requests_per_unit: 5}", "unit_multiplier"},
		{"{unit: second, unit_multiplier: x, requests_per_unit: 5}", "unit_multiplier"},
	} {
		if _, err := parse(c.rateLimit); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %q", c.rateLimit, err, c.want)
		}
	}
	a, _ := parse("{unit: second, unit_multiplier: 30, requests_per_unit: 5}")
	b, _ := parse("{unit: second, unit_multiplier: 60, requests_per_unit: 5}")
	if a.Equal(b) {
		t.Fatal("rules of other multipliers are equal")
	}
}
