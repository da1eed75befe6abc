package httplimit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// KeyFunc derives the limiter key from a request. An empty key lets the
// request through unlimited, without rate-limit headers.
type KeyFunc func(r *http.Request) string

// FailureMode is what a request gets when sluice cannot decide it.
type FailureMode int

const (
	// FailOpen runs the handler, without rate-limit headers: a limiter
	// outage never becomes an outage of the application.
	FailOpen FailureMode = iota
	// FailClosed answers Config.FailClosedStatus without running the handler.
	FailClosed
)

// Config is the middleware's configuration. Zero fields take the defaults
// their comments give, so a Config needs only Client, Key and Limit.
type Config struct {
	// Client talks to sluice (a *redis.Client, *redis.ClusterClient, …).
	// The middleware bounds each call by Timeout whatever the client's own
	// timeouts; setting the client's ContextTimeoutEnabled also ends the
	// abandoned call at that deadline instead of the client's ReadTimeout.
	Client Doer
	// Key derives the limiter key from a request.
	Key KeyFunc
	// Limit is the sluice command that decides each request.
	Limit Limit
	// Name names the policy in RateLimit-Policy and RateLimit when the
	// Limit does not; printable ASCII. Default "default".
	Name string
	// Timeout bounds each sluice call; past it the request fails open or
	// closed. Default 5 ms.
	Timeout time.Duration
	// OnFailure is what a request gets when sluice errs, times out or the
	// breaker is open. Default FailOpen.
	OnFailure FailureMode
	// FailClosedStatus is the status of a request failed closed; 429 or a
	// 5xx. Default 503 (Service Unavailable): the client is not over any
	// limit, the limiter is unavailable.
	FailClosedStatus int
	// Jitter is the most whole seconds added, uniformly at random, to
	// Retry-After on a 429, so refused clients do not retry in lockstep.
	// Default 0: none.
	Jitter time.Duration
	// Rand returns a uniform integer in [0, n) for the jitter. Default
	// math/rand/v2's Int64N; tests pin it.
	Rand func(n int64) int64
	// Breaker configures the circuit breaker in front of sluice.
	Breaker BreakerConfig
	// Metrics registers the middleware's metrics when set (labelled by
	// policy name and outcome, never by key).
	Metrics prometheus.Registerer
	// Logger logs breaker state changes when set.
	Logger *slog.Logger
	// LegacyHeaders and DraftHeaders switch off the header families, both
	// sent by default: the legacy X-RateLimit-Limit, X-RateLimit-Remaining
	// and X-RateLimit-Reset (most clients still read them; the source
	// documents ask for both during the transition), and draft-10's
	// RateLimit-Policy and RateLimit.
	NoLegacyHeaders, NoDraftHeaders bool
	// Now is the clock X-RateLimit-Reset is reckoned from (Unix seconds).
	// Default time.Now.
	Now func() time.Time
	// OnError, when set, is called for each request sluice did not decide,
	// before it fails open or closed; err wraps ErrTimeout, ErrBreakerOpen,
	// ErrClientGone, ErrBadReply or the client's error. Per request: keep
	// it cheap, or sample.
	OnError func(r *http.Request, err error)
}

// BreakerConfig configures the circuit breaker. Only failures to get an
// answer (errors of the connection, timeouts) count; an error reply such
// as WRONGTYPE proves sluice is up.
type BreakerConfig struct {
	// Failures is how many sluice calls failing in a row open the
	// breaker. Default 5.
	Failures uint32
	// OpenFor is how long the breaker stays open, failing every request
	// without calling sluice, before it lets probes through. Default 5 s.
	OpenFor time.Duration
	// Probes is how many calls in a row must succeed, half-open, to close
	// the breaker; one failure reopens it. Default 1.
	Probes uint32
}

// Defaults for zero Config fields.
const (
	DefaultName             = "default"
	DefaultTimeout          = 5 * time.Millisecond
	DefaultFailClosedStatus = http.StatusServiceUnavailable
	DefaultBreakerFailures  = 5
	DefaultBreakerOpenFor   = 5 * time.Second
	DefaultBreakerProbes    = 1
)

// ErrConfig wraps every Validate failure.
var ErrConfig = errors.New("httplimit: invalid configuration")

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.FailClosedStatus == 0 {
		c.FailClosedStatus = DefaultFailClosedStatus
	}
	if c.Breaker.Failures == 0 {
		c.Breaker.Failures = DefaultBreakerFailures
	}
	if c.Breaker.OpenFor == 0 {
		c.Breaker.OpenFor = DefaultBreakerOpenFor
	}
	if c.Breaker.Probes == 0 {
		c.Breaker.Probes = DefaultBreakerProbes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports the first problem of c with its defaults applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: no client", ErrConfig)
	case c.Key == nil:
		return fmt.Errorf("%w: no key function", ErrConfig)
	case c.Limit == nil:
		return fmt.Errorf("%w: no limit", ErrConfig)
	case c.Timeout < 0:
		return fmt.Errorf("%w: timeout %v is negative", ErrConfig, c.Timeout)
	case c.OnFailure != FailOpen && c.OnFailure != FailClosed:
		return fmt.Errorf("%w: unknown failure mode %d", ErrConfig, c.OnFailure)
	case c.FailClosedStatus != http.StatusTooManyRequests && (c.FailClosedStatus < 500 || c.FailClosedStatus > 599):
		return fmt.Errorf("%w: fail-closed status %d: want 429 or 5xx", ErrConfig, c.FailClosedStatus)
	case c.Jitter < 0 || c.Jitter%time.Second != 0:
		return fmt.Errorf("%w: jitter %v: want a whole number of seconds, >= 0", ErrConfig, c.Jitter)
	case c.Breaker.OpenFor < 0:
		return fmt.Errorf("%w: breaker open time %v is negative", ErrConfig, c.Breaker.OpenFor)
	}
	if err := validName(c.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := c.Limit.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}
