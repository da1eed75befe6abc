package httplimit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Reserve is RL.RESERVE before the handler and RL.SETTLE after it, for
// requests whose cost is known only when the handler is done (a streamed
// LLM response's tokens): Estimate's units are charged against the
// domain's rules up front and held under a fresh id; the handler reports
// what the request really cost with ReportCost, and the settle gives the
// rest back, or charges the excess (README "Reserve now, settle when the
// cost is known"). A handler that panics cancels (everything goes back);
// one that reports nothing settles at the estimate.
type Reserve struct {
	// Domain is the rules' domain.
	Domain string
	// Descriptors returns the request's descriptors, as for Rules.
	Descriptors func(r *http.Request, key string) [][]Entry
	// Estimate returns the units to reserve for r (0 means 1).
	Estimate func(r *http.Request) int64
	// TTL is how long sluice holds a reservation whose settle never
	// comes (the process died): it keeps its charge then. A whole number
	// of seconds, at most a day, longer than the slowest handler.
	TTL time.Duration
}

// Validate checks the domain, the functions and the ttl.
func (l Reserve) Validate() error {
	switch {
	case l.Domain == "":
		return fmt.Errorf("%w: a reserve needs a domain", ErrInvalidLimit)
	case l.Descriptors == nil || l.Estimate == nil:
		return fmt.Errorf("%w: a reserve needs Descriptors and Estimate functions", ErrInvalidLimit)
	case l.TTL > 24*time.Hour:
		return fmt.Errorf("%w: ttl %v is more than a day", ErrInvalidLimit, l.TTL)
	}
	_, err := wholeSeconds("ttl", l.TTL)
	return err
}

// Check sends RL.RESERVE domain id ttl COST estimate DESCRIPTOR … with a
// new random id.
func (l Reserve) Check(ctx context.Context, c Doer, r *http.Request, key string) (Decision, error) {
	id := rand.Text()
	est := max(l.Estimate(r), 0)
	args, ok := appendDescriptors([]any{"RL.RESERVE", l.Domain, id, int64(l.TTL / time.Second), "COST", cost(est)}, l.Descriptors(r, key))
	if !ok {
		return Decision{Limit: -1, RetryAfter: -1}, nil
	}
	d, err := checkRules(ctx, c, args...)
	if err == nil && !d.Limited {
		d.lease, d.reserved = id, cost(est)
	}
	return d, err
}

// Release settles the reservation Check made: with the cost the handler
// reported, at the estimate when it reported none, or cancelled when it
// panicked. A reservation already gone (expired) is not an error.
func (l Reserve) Release(ctx context.Context, c Doer, _ string, d Decision) error {
	if d.lease == "" {
		return nil
	}
	switch {
	case d.outcome.panicked:
		return c.Do(ctx, "RL.CANCEL", l.Domain, d.lease).Err()
	case d.outcome.cost >= 0:
		return ignoreNil(c.Do(ctx, "RL.SETTLE", l.Domain, d.lease, d.outcome.cost).Err())
	}
	return ignoreNil(c.Do(ctx, "RL.SETTLE", l.Domain, d.lease, d.reserved).Err())
}

// handlerOutcome is what the handler of a reserved request reported.
type handlerOutcome struct {
	cost     int64 // -1: none reported
	panicked bool
}

// costCell is where ReportCost puts a request's cost.
type costCell struct{ cost atomic.Int64 }

type costKey struct{}

// ReportCost tells the middleware what the request really cost (the
// tokens its response took), to settle its Reserve with. Call it from the
// handler, with the request's context, before the handler returns; the
// last report wins. Outside a Reserve it does nothing.
func ReportCost(ctx context.Context, n int64) {
	if cell, ok := ctx.Value(costKey{}).(*costCell); ok && n >= 0 {
		cell.cost.Store(n)
	}
}

// withCostCell gives r a cell for ReportCost.
func withCostCell(r *http.Request) (*http.Request, *costCell) {
	cell := &costCell{}
	cell.cost.Store(-1)
	return r.WithContext(context.WithValue(r.Context(), costKey{}, cell)), cell
}

// ignoreNil is err, but for the nil reply RL.SETTLE gives an id it does
// not hold (expired, or settled by a retry).
func ignoreNil(err error) error {
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}
