package conc

import "math"

// Params are the arguments of CONC.ACQUIRE besides the key and request id.
type Params struct {
	// Limit is the most leases the key may hold at once, 1..MaxLimit.
	Limit int64
	// Lease is how long an acquired lease lasts, in nanoseconds; > 0.
	Lease int64
}

// DefaultParams are Stripe's published setting: 20 requests in flight, and a
// lease long enough for any sane request (60 s) before it is presumed dead.
func DefaultParams() Params {
	return Params{Limit: 20, Lease: 60_000_000_000}
}

// Validate reports the first thing wrong with p, as a sentinel error.
func (p Params) Validate() error {
	if p.Limit <= 0 {
		return ErrLimitNotPositive
	}
	if p.Limit > MaxLimit {
		return ErrLimitTooLarge
	}
	if p.Lease <= 0 {
		return ErrLeaseNotPositive
	}
	return nil
}

// expiryAt is now + lease for a positive lease, or ErrOverflow.
func expiryAt(now, lease int64) (int64, error) {
	if now > math.MaxInt64-lease {
		return 0, ErrOverflow
	}
	return now + lease, nil
}

// until is the duration from now to a later instant t, saturating instead of
// wrapping when now is far in the past (negative).
func until(t, now int64) int64 {
	d := t - now
	if d < 0 {
		return math.MaxInt64
	}
	return d
}
