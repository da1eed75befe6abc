package httplimit

import (
	"net/http"
	"strconv"

	"github.com/sluice-rl/sluice/internal/sfield"
)

// Header names of draft-ietf-httpapi-ratelimit-headers-10 and RFC 9110,
// and the legacy X-RateLimit-* family.
const (
	HeaderPolicy     = "RateLimit-Policy"
	HeaderRateLimit  = "RateLimit"
	HeaderRetryAfter = "Retry-After"

	HeaderLegacyLimit     = "X-RateLimit-Limit"
	HeaderLegacyRemaining = "X-RateLimit-Remaining"
	HeaderLegacyReset     = "X-RateLimit-Reset"
)

// errName is a policy name that is not a Structured Fields string.
var errName = sfield.ErrName

// validName accepts what a Structured Fields String can hold.
func validName(name string) error { return sfield.ValidName(name) }

// policyField is the RateLimit-Policy value: "name";q=Q[;qu="unit"][;w=W].
func policyField(name string, p Policy) string {
	return sfield.Policy(name, p.Quota, p.Unit, p.Window)
}

// rateLimitField is the RateLimit value: "name";r=R;t=T.
func rateLimitField(name string, remaining, reset int64) string {
	return sfield.RateLimit(name, remaining, reset)
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

// setRateLimitHeaders writes the header families cfg asks for, for one
// decision. A decision with a negative limit (RL.CHECK matching no rule)
// limited nothing and carries none.
func setRateLimitHeaders(h http.Header, cfg Config, d Decision) {
	if d.Limit < 0 {
		return
	}
	name := cfg.Name
	if d.Policy.Name != "" && validName(d.Policy.Name) == nil {
		name = d.Policy.Name
	}
	reset := resetSeconds(d)
	if !cfg.NoDraftHeaders {
		h.Set(HeaderPolicy, policyField(name, d.Policy))
		h.Set(HeaderRateLimit, rateLimitField(name, d.Remaining, reset))
	}
	if !cfg.NoLegacyHeaders {
		// The policy's quota, the units left, and the Unix second by when
		// the draft's t has passed (as the documents' clients read it).
		h.Set(HeaderLegacyLimit, strconv.FormatInt(max(d.Policy.Quota, 0), 10))
		h.Set(HeaderLegacyRemaining, strconv.FormatInt(max(d.Remaining, 0), 10))
		h.Set(HeaderLegacyReset, strconv.FormatInt(cfg.Now().Unix()+reset, 10))
	}
}
