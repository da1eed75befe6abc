package window

import (
	"math/big"

	"github.com/sluice-rl/sluice/limiter"
)

// The references below are deliberately naive: a plain list of every
// admitted (instant, units), scanned on each check, and for the counter the
// estimate in exact rationals (math/big) with RetryAfter found by binary
// search over time rather than the closed form the package uses.

type admission struct{ t, n int64 }

// refOutcome is everything a check returns besides the state.
type refOutcome struct {
	res      limiter.Result
	store    bool
	expireAt int64
}

// refLog is the brute-force sliding window log.
type refLog struct{ adm []admission }

// unitsIn sums units admitted in (from, to]. Admissions are appended in
// time order, so the scan runs back from the newest and stops at from.
func (r *refLog) unitsIn(from, to int64) int64 {
	sum := int64(0)
	for j := len(r.adm) - 1; j >= 0 && r.adm[j].t > from; j-- {
		if r.adm[j].t <= to {
			sum += r.adm[j].n
		}
	}
	return sum
}

func (r *refLog) check(now int64, p Params, cost int64) refOutcome {
	eff := now
	if len(r.adm) > 0 && r.adm[len(r.adm)-1].t > eff {
		eff = r.adm[len(r.adm)-1].t
	}
	used := r.unitsIn(eff-p.Window, eff)
	out := refOutcome{res: limiter.Result{Limit: p.Limit, RetryAfter: limiter.Never}}
	allowed := cost <= p.Limit && used+cost <= p.Limit
	if allowed && cost > 0 {
		if len(r.adm) > 0 && r.adm[len(r.adm)-1].t == eff {
			r.adm[len(r.adm)-1].n += cost
		} else {
			r.adm = append(r.adm, admission{eff, cost})
		}
		used += cost
		out.store, out.expireAt = true, eff+p.Window
	}
	out.res.Limited = !allowed
	out.res.Remaining = max(0, p.Limit-used)
	if !allowed && cost <= p.Limit {
		// Capacity only frees when an entry leaves: try each such instant.
		first := len(r.adm)
		for first > 0 && r.adm[first-1].t > eff-p.Window {
			first--
		}
		for _, a := range r.adm[first:] {
			at := a.t + p.Window
			if r.unitsIn(at-p.Window, at)+cost <= p.Limit {
				out.res.RetryAfter = at - now
				break
			}
		}
	}
	if used > 0 {
		out.res.ResetAfter = r.adm[len(r.adm)-1].t + p.Window - now
	}
	return out
}

// refCounter is the sliding window counter recomputed from its admissions.
type refCounter struct{ adm []admission }

func floorTo(t, w int64) int64 { return t / w * w } // t ≥ 0

// effective is now, or the start of the newest admission's sub-window if
// that is later.
func (r *refCounter) effective(now, w int64) int64 {
	if len(r.adm) > 0 {
		if s := floorTo(r.adm[len(r.adm)-1].t, w); s > now {
			return s
		}
	}
	return now
}

func (r *refCounter) sums(at, w int64) (prev, curr int64) {
	start := floorTo(at, w)
	for j := len(r.adm) - 1; j >= 0 && r.adm[j].t >= start-w; j-- {
		switch floorTo(r.adm[j].t, w) {
		case start:
			curr += r.adm[j].n
		case start - w:
			prev += r.adm[j].n
		}
	}
	return
}

// estimate is prev·(W − elapsed)/W + curr at instant at, exactly.
func (r *refCounter) estimate(at, w int64) *big.Rat {
	prev, curr := r.sums(at, w)
	elapsed := at - floorTo(at, w)
	e := big.NewRat(prev, 1)
	e.Mul(e, big.NewRat(w-elapsed, w))
	return e.Add(e, big.NewRat(curr, 1))
}

// fits reports estimate + cost ≤ limit at instant at, both sides
// multiplied by the window (in big integers, as rationals are slow).
func (r *refCounter) fits(at int64, p Params, cost int64) bool {
	w := p.Window
	prev, curr := r.sums(at, w)
	elapsed := at - floorTo(at, w)
	lhs := new(big.Int).Mul(big.NewInt(prev), big.NewInt(w-elapsed))
	lhs.Add(lhs, new(big.Int).Mul(big.NewInt(curr+cost), big.NewInt(w)))
	return lhs.Cmp(new(big.Int).Mul(big.NewInt(p.Limit), big.NewInt(w))) <= 0
}

func (r *refCounter) check(now int64, p Params, cost int64) refOutcome {
	w := p.Window
	eff := r.effective(now, w)
	out := refOutcome{res: limiter.Result{Limit: p.Limit, RetryAfter: limiter.Never}}
	allowed := cost <= p.Limit && r.fits(eff, p, cost)
	if allowed && cost > 0 {
		r.adm = append(r.adm, admission{eff, cost})
		out.store, out.expireAt = true, floorTo(eff, w)+2*w
	}
	out.res.Limited = !allowed
	left := big.NewRat(p.Limit, 1)
	left.Sub(left, r.estimate(eff, w))
	if left.Sign() > 0 {
		q := new(big.Int).Quo(left.Num(), left.Denom())
		out.res.Remaining = q.Int64()
	}
	if !allowed && cost <= p.Limit {
		lo, hi := eff, floorTo(eff, w)+2*w // refused at lo; passes at hi (all gone)
		if !r.fits(hi, p, cost) {
			panic("reference: a request within the limit never passes")
		}
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if r.fits(mid, p, cost) {
				hi = mid
			} else {
				lo = mid
			}
		}
		out.res.RetryAfter = hi - now
	}
	prev, curr := r.sums(eff, w)
	switch {
	case curr > 0:
		out.res.ResetAfter = floorTo(eff, w) + 2*w - now
	case prev > 0:
		out.res.ResetAfter = floorTo(eff, w) + w - now
	}
	return out
}

// refFixed is the fixed window recomputed from its admissions.
type refFixed struct{ adm []admission }

func (r *refFixed) check(now int64, p Params, cost int64) refOutcome {
	w := p.Window
	eff := now
	if len(r.adm) > 0 && floorTo(r.adm[len(r.adm)-1].t, w) > now {
		eff = floorTo(r.adm[len(r.adm)-1].t, w)
	}
	start := floorTo(eff, w)
	count := int64(0)
	for j := len(r.adm) - 1; j >= 0 && r.adm[j].t >= start; j-- {
		count += r.adm[j].n
	}
	out := refOutcome{res: limiter.Result{Limit: p.Limit, RetryAfter: limiter.Never}}
	allowed := cost <= p.Limit && count+cost <= p.Limit
	if allowed && cost > 0 {
		r.adm = append(r.adm, admission{eff, cost})
		count += cost
		out.store, out.expireAt = true, start+w
	}
	out.res.Limited = !allowed
	out.res.Remaining = max(0, p.Limit-count)
	if !allowed && cost <= p.Limit {
		out.res.RetryAfter = start + w - now
	}
	if count > 0 {
		out.res.ResetAfter = start + w - now
	}
	return out
}
