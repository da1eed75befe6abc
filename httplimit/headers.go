package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Header names of draft-ietf-httpapi-ratelimit-headers-10 and RFC 9110.
const (
	HeaderPolicy     = "RateLimit-Policy"
	HeaderRateLimit  = "RateLimit"
	HeaderRetryAfter = "Retry-After"
)

// errName is a policy name that is not a Structured Fields string.
var errName = errors.New("policy name must be 1 to 256 printable ASCII characters")

// validName accepts what a Structured Fields String can hold (RFC 9651
// §3.3.3: printable ASCII, 0x20 to 0x7E), bounded for header size.
func validName(name string) error {
	if name == "" || len(name) > 256 {
		return fmt.Errorf("%w: %q", errName, name)
	}
	for i := range len(name) {
		if name[i] < 0x20 || name[i] > 0x7e {
			return fmt.Errorf("%w: %q", errName, name)
		}
	}
	return nil
}

// sfString serialises a valid name as a Structured Fields String.
func sfString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := range len(s) {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
}

// policyField is the RateLimit-Policy value: "name";q=Q[;qu="unit"][;w=W].
func policyField(name string, p Policy) string {
	var b strings.Builder
	sfString(&b, name)
	b.WriteString(";q=")
	b.WriteString(strconv.FormatInt(max(p.Quota, 0), 10))
	if p.Unit != "" {
		b.WriteString(";qu=")
		sfString(&b, p.Unit)
	}
	if p.Window > 0 {
		b.WriteString(";w=")
		b.WriteString(strconv.FormatInt(p.Window, 10))
	}
	return b.String()
}

// rateLimitField is the RateLimit value: "name";r=R;t=T.
func rateLimitField(name string, remaining, reset int64) string {
	var b strings.Builder
	sfString(&b, name)
	b.WriteString(";r=")
	b.WriteString(strconv.FormatInt(max(remaining, 0), 10))
	b.WriteString(";t=")
	b.WriteString(strconv.FormatInt(max(reset, 0), 10))
	return b.String()
}

// retryBase is the least Retry-After a refusal may carry, in seconds: the
// reply's retry_after, at least 1 (a reply rounds a wait under a
// millisecond to 0, and "retry after 0" invites a tight loop). A request
// that can never pass (retry_after -1: it costs more than the limit) gets
// the time until the key is empty, at least 1.
func retryBase(d Decision) int64 {
	s := d.RetryAfter
	if s < 0 {
		s = d.ResetAfter
	}
	return max(s, 1)
}

// resetSeconds is the "t" parameter: on a refusal the wait Retry-After is
// built on, so Retry-After never names an earlier instant (draft §6);
// otherwise reset_after, by when every unit this key holds is back.
func resetSeconds(d Decision) int64 {
	if d.Limited {
		return retryBase(d)
	}
	return max(d.ResetAfter, 0)
}

// setRateLimitHeaders writes both draft fields for one decision.
// A decision with a negative limit (RL.CHECK matching no rule) limited
// nothing and carries none.
func setRateLimitHeaders(h http.Header, name string, d Decision) {
	if d.Limit < 0 {
		return
	}
	if d.Policy.Name != "" && validName(d.Policy.Name) == nil {
		name = d.Policy.Name
	}
	h.Set(HeaderPolicy, policyField(name, d.Policy))
	h.Set(HeaderRateLimit, rateLimitField(name, d.Remaining, resetSeconds(d)))
}
