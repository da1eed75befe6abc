package gcra

import (
	"math"

	"github.com/sluice-rl/sluice/limiter"
)

// Throttle decides one CL.THROTTLE call. tat is the stored theoretical
// arrival time (unix ns) and exists says whether the key holds one; now is
// unix ns; quantity is the cost of the request (0 peeks).
//
// When store is true the caller must save newTAT and expire the key at
// newTAT (ttl = newTAT − now = r.ResetAfter > 0). When store is false the key
// must be left exactly as it was (and not created); newTAT is then tat
// unchanged. A non-nil error (see the package's sentinels) means no decision
// was made and nothing may be written.
func Throttle(tat int64, exists bool, now int64, l Limit, quantity int64) (newTAT int64, store bool, r limiter.Result, err error) {
	ei, limit, dvt, err := l.derive()
	if err != nil {
		return tat, false, limiter.Result{}, err
	}
	if quantity < 0 {
		return tat, false, limiter.Result{}, ErrNegativeQuantity
	}
	if now < 0 {
		return tat, false, limiter.Result{}, ErrNegativeNow
	}

	// lead = max(tat, now) − now: how far the schedule runs ahead of now,
	// i.e. the bucket level. now ≥ 0 keeps tat − now inside int64.
	var lead int64
	if exists && tat > now {
		lead = tat - now
	}
	r = limiter.Result{Limit: limit, RetryAfter: limiter.Never}

	// quantity > limit ⇔ ei × quantity > dvt (dvt is exactly ei × limit):
	// such a request can never pass, and testing it first means ei × quantity
	// below cannot overflow. Otherwise the request is refused when the pushed
	// TAT would lead now by more than dvt: lead + ei×quantity > dvt.
	if quantity > limit || lead > dvt-ei*quantity {
		r.Limited = true
		if quantity <= limit {
			r.RetryAfter = lead - (dvt - ei*quantity)
		}
		r.ResetAfter = lead
		r.Remaining = remaining(dvt, lead, ei)
		return tat, false, r, nil
	}

	ttl := lead + ei*quantity // ≤ dvt
	r.ResetAfter = ttl
	r.Remaining = remaining(dvt, ttl, ei)
	if quantity == 0 {
		return tat, false, r, nil
	}
	if now > math.MaxInt64-ttl {
		return tat, false, limiter.Result{}, ErrTimeOverflow
	}
	return now + ttl, true, r, nil
}

// remaining is how many whole units still fit in the bucket once it holds
// ttl. Because ttl ≥ 0 it never exceeds dvt / ei = limit, the cap redis-cell
// lacks.
func remaining(dvt, ttl, ei int64) int64 {
	if ttl >= dvt {
		return 0
	}
	return (dvt - ttl) / ei
}
