package rls

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ErrConfig: a Config that does not validate.
var ErrConfig = errors.New("rls: bad configuration")

// Limits bound a request: past any of them it is INVALID_ARGUMENT.
type Limits struct {
	// Descriptors is the most descriptors in one request (default and
	// most 64).
	Descriptors int
	// Entries is the most entries of all descriptors together (default
	// and most 256).
	Entries int
	// DomainBytes, KeyBytes and ValueBytes bound the domain and each
	// entry's key and value (defaults 256, 1024 and 4096 bytes).
	DomainBytes, KeyBytes, ValueBytes int
}

// DefaultLimits are the limits a zero Config takes.
func DefaultLimits() Limits {
	return Limits{Descriptors: 64, Entries: 256, DomainBytes: 256, KeyBytes: 1024, ValueBytes: 4096}
}

// Validate reports a limit out of its range.
func (l Limits) Validate() error {
	switch {
	case l.Descriptors < 1 || l.Descriptors > 64:
		return fmt.Errorf("%w: descriptors per request must be in [1, 64], not %d", ErrConfig, l.Descriptors)
	case l.Entries < 1 || l.Entries > 256:
		return fmt.Errorf("%w: entries per request must be in [1, 256], not %d", ErrConfig, l.Entries)
	case l.DomainBytes < 1 || l.KeyBytes < 1 || l.ValueBytes < 1:
		return fmt.Errorf("%w: byte limits must be positive", ErrConfig)
	}
	return nil
}

// Config configures a Service.
type Config struct {
	// Limits bound requests (zero: DefaultLimits).
	Limits Limits
	// Quota bounds the RLQS streams (zero fields: their defaults).
	Quota QuotaLimits
	// ResponseHeaders fills response_headers_to_add as envoyproxy/ratelimit
	// does with LIMIT_RESPONSE_HEADERS_ENABLED (RateLimit-Limit,
	// RateLimit-Remaining, RateLimit-Reset), plus the draft-10 RateLimit
	// and RateLimit-Policy pair.
	ResponseHeaders bool
	// Password, when set, is required of every call: gRPC metadata or an
	// HTTP header "authorization: Bearer <password>" (the server's
	// --requirepass; Envoy sends it as the rate limit service's
	// initial_metadata).
	Password string
	// Log receives the service's events; nil discards.
	Log *slog.Logger
	// Now is the clock a quota stream's buckets age by (Unix ns): a bucket
	// not reported for two of its ttls is abandoned. Default the wall
	// clock; the server passes its own, which DEBUG CLOCK moves in tests.
	Now func() int64
}

// QuotaLimits bound what RLQS streams hold: how many are open at once,
// and the bytes of bucket ids one stream holds leases of (its domain,
// keys and values), so a stream's memory is bounded by bytes, not only
// by its 4096 buckets.
type QuotaLimits struct {
	// Streams is the most streams open at once, on all connections
	// (default 1024); past it a stream is refused RESOURCE_EXHAUSTED.
	Streams int
	// StreamBytes is the most bytes of bucket ids one stream holds (default
	// 1 MiB); a report past it is refused RESOURCE_EXHAUSTED.
	StreamBytes int
}

func (q QuotaLimits) withDefaults() QuotaLimits {
	if q.Streams <= 0 {
		q.Streams = 1024
	}
	if q.StreamBytes <= 0 {
		q.StreamBytes = 1 << 20
	}
	return q
}

func (c Config) withDefaults() Config {
	if c.Limits == (Limits{}) {
		c.Limits = DefaultLimits()
	}
	c.Quota = c.Quota.withDefaults()
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = func() int64 { return time.Now().UnixNano() }
	}
	return c
}

// Validate checks the configuration (after defaults).
func (c Config) Validate() error { return c.withDefaults().Limits.Validate() }
