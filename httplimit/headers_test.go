package httplimit

import (
	"errors"
	"strings"
	"testing"
)

func TestPolicyField(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		want string
	}{
		{"default", Policy{Quota: 100, Window: 60}, `"default";q=100;w=60`},
		{`a"b\c`, Policy{Quota: 5, Window: 1}, `"a\"b\\c";q=5;w=1`},
		{"conc", Policy{Quota: 10, Unit: "concurrent-requests"}, `"conc";q=10;qu="concurrent-requests"`},
		{"month", Policy{Quota: 10000}, `"month";q=10000`},
		{"neg", Policy{Quota: -3, Window: 60}, `"neg";q=0;w=60`},
	} {
		if got := policyField(tc.name, tc.p); got != tc.want {
			t.Errorf("policyField(%q, %+v) = %s, want %s", tc.name, tc.p, got, tc.want)
		}
	}
}

func TestRateLimitField(t *testing.T) {
	if got, want := rateLimitField("default", 42, 17), `"default";r=42;t=17`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got, want := rateLimitField("x", -1, -1), `"x";r=0;t=0`; got != want {
		t.Errorf("negative values: got %s, want %s (both must be non-negative integers)", got, want)
	}
}

// Retry-After and t for every shape of refusal, and t when allowed.
func TestRetryAndReset(t *testing.T) {
	for _, tc := range []struct {
		d          Decision
		retry, tee int64
	}{
		{Decision{Limited: true, RetryAfter: 0, ResetAfter: 0}, 1, 1},     // under a millisecond
		{Decision{Limited: true, RetryAfter: 7, ResetAfter: 60}, 7, 7},    // the reply's wait
		{Decision{Limited: true, RetryAfter: -1, ResetAfter: 30}, 30, 30}, // can never pass
		{Decision{Limited: true, RetryAfter: -1, ResetAfter: 0}, 1, 1},
		{Decision{Limited: false, RetryAfter: -1, ResetAfter: 42}, 1, 42},
		{Decision{Limited: false, RetryAfter: -1, ResetAfter: 0}, 1, 0},
	} {
		if tc.d.Limited {
			if got := retryBase(tc.d); got != tc.retry {
				t.Errorf("retryBase(%+v) = %d, want %d", tc.d, got, tc.retry)
			}
		}
		if got := resetSeconds(tc.d); got != tc.tee {
			t.Errorf("resetSeconds(%+v) = %d, want %d", tc.d, got, tc.tee)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"default", "per user", `q"uote`, "~", strings.Repeat("a", 256)} {
		if err := validName(ok); err != nil {
			t.Errorf("validName(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "tab\there", "new\nline", "é", "\x7f", strings.Repeat("a", 257)} {
		if err := validName(bad); !errors.Is(err, errName) {
			t.Errorf("validName(%q) = %v, want errName", bad, err)
		}
	}
}
