package httplimit

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/gcra"
)

// SlidingWindow is SW.CHECK: at most Limit units in any Window.
type SlidingWindow struct {
	// Limit is the most units admitted in any Window; positive.
	Limit int64
	// Window is a positive whole number of seconds.
	Window time.Duration
	// Cost is the units each request takes; 0 means 1.
	Cost int64
	// Exact chooses the sliding log (EXACT) over the counter.
	Exact bool
}

// Validate checks what SW.CHECK would refuse.
func (l SlidingWindow) Validate() error {
	if l.Limit <= 0 {
		return fmt.Errorf("%w: sliding window limit %d must be positive", ErrInvalidLimit, l.Limit)
	}
	if l.Exact && l.Limit > 100000 {
		return fmt.Errorf("%w: exact sliding window limit %d is above 100000", ErrInvalidLimit, l.Limit)
	}
	if _, err := wholeSeconds("window", l.Window); err != nil {
		return err
	}
	return validCost(l.Cost)
}

// Check sends SW.CHECK key limit window COST cost [EXACT].
func (l SlidingWindow) Check(ctx context.Context, c Doer, _ *http.Request, key string) (Decision, error) {
	w := int64(l.Window / time.Second)
	args := []any{"SW.CHECK", key, l.Limit, w, "COST", cost(l.Cost)}
	if l.Exact {
		args = append(args, "EXACT")
	}
	d, err := check(ctx, c, args...)
	d.Policy = Policy{Quota: l.Limit, Window: w}
	return d, err
}

// FixedWindow is FW.CHECK: at most Limit units per Window, windows aligned
// to multiples of Window since the Unix epoch.
type FixedWindow struct {
	// Limit is the most units admitted per window; positive.
	Limit int64
	// Window is a positive whole number of seconds.
	Window time.Duration
	// Cost is the units each request takes; 0 means 1.
	Cost int64
}

// Validate checks what FW.CHECK would refuse.
func (l FixedWindow) Validate() error {
	if l.Limit <= 0 {
		return fmt.Errorf("%w: fixed window limit %d must be positive", ErrInvalidLimit, l.Limit)
	}
	if _, err := wholeSeconds("window", l.Window); err != nil {
		return err
	}
	return validCost(l.Cost)
}

// Check sends FW.CHECK key limit window COST cost.
func (l FixedWindow) Check(ctx context.Context, c Doer, _ *http.Request, key string) (Decision, error) {
	w := int64(l.Window / time.Second)
	d, err := check(ctx, c, "FW.CHECK", key, l.Limit, w, "COST", cost(l.Cost))
	d.Policy = Policy{Quota: l.Limit, Window: w}
	return d, err
}

// GCRA is CL.THROTTLE: Count units per Period, bursts of up to Burst+1.
type GCRA struct {
	// Burst is max_burst: how many units beyond one may pass at once; >= 0.
	Burst int64
	// Count units are admitted per Period; positive.
	Count int64
	// Period is a positive whole number of seconds.
	Period time.Duration
	// Quantity is the units each request takes; 0 means 1.
	Quantity int64
}

// Validate checks what CL.THROTTLE would refuse.
func (l GCRA) Validate() error {
	if l.Burst < 0 {
		return fmt.Errorf("%w: GCRA burst %d must not be negative", ErrInvalidLimit, l.Burst)
	}
	if l.Count <= 0 {
		return fmt.Errorf("%w: GCRA count %d must be positive", ErrInvalidLimit, l.Count)
	}
	if _, err := wholeSeconds("period", l.Period); err != nil {
		return err
	}
	return validCost(l.Quantity)
}

// Check sends CL.THROTTLE key burst count period quantity. The policy it
// advertises is what the key holds, Burst+1 (the reply's limit: never less
// than its remaining), per the time an empty key takes to refill it,
// rounded up to whole seconds so it never promises more than Count per
// Period (gcra.Limit.PolicyWindow).
func (l GCRA) Check(ctx context.Context, c Doer, _ *http.Request, key string) (Decision, error) {
	p := int64(l.Period / time.Second)
	d, err := check(ctx, c, "CL.THROTTLE", key, l.Burst, l.Count, p, cost(l.Quantity))
	d.Policy = Policy{Quota: l.Burst + 1, Window: gcra.Limit{MaxBurst: l.Burst, Count: l.Count, Period: p * 1e9}.PolicyWindow()}
	return d, err
}

// Quota is QUOTA.CHECK: Limit units per calendar Period.
type Quota struct {
	// Limit is the units per period; >= 0.
	Limit int64
	// Period is HOUR, DAY, WEEK, MONTH or YEAR (any case).
	Period string
	// Anchor phases the periods (the subscription instant); zero: calendar
	// boundaries.
	Anchor time.Time
	// TZ is the IANA zone periods are read in; empty: UTC.
	TZ string
	// Cost is the units each request takes; 0 means 1.
	Cost int64
}

// quotaWindow is a period's nominal length for the "w" parameter (a DAY
// across a daylight-saving change is an hour off); months and years vary,
// so they advertise none (0). ok is false for an unknown period.
func quotaWindow(period string) (seconds int64, ok bool) {
	switch period {
	case "HOUR":
		return 3600, true
	case "DAY":
		return 86400, true
	case "WEEK":
		return 7 * 86400, true
	case "MONTH", "YEAR":
		return 0, true
	}
	return 0, false
}

// Validate checks what QUOTA.CHECK would refuse, except the zone name,
// which only the server's tz database can judge.
func (l Quota) Validate() error {
	if l.Limit < 0 {
		return fmt.Errorf("%w: quota limit %d must not be negative", ErrInvalidLimit, l.Limit)
	}
	if _, ok := quotaWindow(strings.ToUpper(l.Period)); !ok {
		return fmt.Errorf("%w: quota period %q: want HOUR, DAY, WEEK, MONTH or YEAR", ErrInvalidLimit, l.Period)
	}
	if !l.Anchor.IsZero() && l.Anchor.Unix() < 0 {
		return fmt.Errorf("%w: quota anchor %v is before 1970", ErrInvalidLimit, l.Anchor)
	}
	if l.TZ == "Local" {
		return fmt.Errorf("%w: quota zone must be an IANA name, not Local", ErrInvalidLimit)
	}
	return validCost(l.Cost)
}

// Check sends QUOTA.CHECK key limit period [ANCHOR s] [TZ zone] COST cost.
func (l Quota) Check(ctx context.Context, c Doer, _ *http.Request, key string) (Decision, error) {
	period := strings.ToUpper(l.Period)
	args := []any{"QUOTA.CHECK", key, l.Limit, period}
	if !l.Anchor.IsZero() {
		args = append(args, "ANCHOR", l.Anchor.Unix())
	}
	if l.TZ != "" {
		args = append(args, "TZ", l.TZ)
	}
	args = append(args, "COST", cost(l.Cost))
	d, err := check(ctx, c, args...)
	w, _ := quotaWindow(period)
	d.Policy = Policy{Quota: l.Limit, Window: w}
	return d, err
}

// Concurrency is CONC.ACQUIRE before the handler and CONC.RELEASE after
// it: at most Limit requests of one key in flight.
type Concurrency struct {
	// Limit is the most requests in flight per key; 1..10000.
	Limit int64
	// Lease bounds how long a slot stays taken if the release is lost (the
	// process died, sluice was unreachable); a positive whole number of
	// seconds longer than the slowest handler.
	Lease time.Duration
}

// Validate checks what CONC.ACQUIRE would refuse.
func (l Concurrency) Validate() error {
	if l.Limit <= 0 || l.Limit > 10000 {
		return fmt.Errorf("%w: concurrency limit %d must be in 1..10000", ErrInvalidLimit, l.Limit)
	}
	_, err := wholeSeconds("lease", l.Lease)
	return err
}

// Check sends CONC.ACQUIRE key limit lease id with a new random request id.
func (l Concurrency) Check(ctx context.Context, c Doer, _ *http.Request, key string) (Decision, error) {
	id := rand.Text()
	d, err := check(ctx, c, "CONC.ACQUIRE", key, l.Limit, int64(l.Lease/time.Second), id)
	d.Policy = Policy{Quota: l.Limit, Unit: "concurrent-requests"}
	if err == nil && !d.Limited {
		d.lease = id
	}
	return d, err
}

// Release sends CONC.RELEASE for the lease Check took; a lease already
// gone (expired) is not an error.
func (l Concurrency) Release(ctx context.Context, c Doer, key string, d Decision) error {
	if d.lease == "" {
		return nil
	}
	return c.Do(ctx, "CONC.RELEASE", key, d.lease).Err()
}

func wholeSeconds(what string, d time.Duration) (int64, error) {
	if d < time.Second || d%time.Second != 0 {
		return 0, fmt.Errorf("%w: %s %v must be a positive whole number of seconds", ErrInvalidLimit, what, d)
	}
	return int64(d / time.Second), nil
}

func validCost(n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: cost %d must not be negative", ErrInvalidLimit, n)
	}
	return nil
}

// cost turns the zero value into one unit: a cost of 0 would be a peek
// that never counts anything.
func cost(n int64) int64 {
	if n == 0 {
		return 1
	}
	return n
}
