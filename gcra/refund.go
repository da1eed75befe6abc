package gcra

import "math"

// A charge held to be settled later (RL.RESERVE, RL.SETTLE) is given back,
// in part or whole, by Refund, and a charge found too small is topped up
// by Force.
//
// Charging n units at t0 moved the key from TAT a to base + n·ei, where
// base = max(a, t0). The state that "really happened" without the refunded
// units is the replay of every admission with this one charging kept < n
// units: it starts from base + kept·ei. Every later admission maps the TAT
// by x ↦ max(x, t) + c·ei, which never widens the gap between two TATs and
// narrows it only by how far t lies beyond the lower one: the gap of
// (n − kept)·ei can only have been eaten by time in which the replay's
// schedule ran dry, and all such time lies in (base + kept·ei, now]. So
// giving back
//
//	r = max(0, base + n·ei − max(base + kept·ei, now))
//
// never leaves the key laxer than the replay (no unit is admitted that the
// replay would refuse), and is exactly the replay when nothing else touched
// the key since the charge (the TAT is then base + n·ei, and it becomes
// max(base + kept·ei, now) — the replay's, seen at now).

// Refund gives back what a charge of n units (starting at base, as above)
// holds beyond kept units, at now, from the stored TAT: it returns the new
// TAT and the time given back (a whole number of emission intervals only
// when no time had run out). It never returns a TAT below tat − n·ei.
func Refund(tat, base, n, kept, ei, now int64) (newTAT, givenBack int64) {
	if n <= kept || ei <= 0 {
		return tat, 0
	}
	charged, ok1 := mulNonNeg(n, ei)
	held, ok2 := mulNonNeg(kept, ei)
	if !ok1 || !ok2 || base > math.MaxInt64-charged {
		return tat, 0
	}
	r := base + charged - max(base+held, now)
	if r <= 0 {
		return tat, 0
	}
	return tat - r, r
}

// Force charges n units at now whatever the limit says (the work they
// stand for is done): the TAT moves to max(tat, now) + n·ei, which later
// requests wait out. exists says whether tat is a stored TAT. A charge
// whose TAT would pass the int64 range saturates at its end (year 2262):
// the key is refused until then — never the charge dropped, which would
// be lax (every algorithm's Force saturates the same way).
func Force(tat int64, exists bool, now, n, ei int64) (int64, error) {
	if n < 0 {
		return tat, ErrNegativeQuantity
	}
	if now < 0 {
		return tat, ErrNegativeNow
	}
	from := now
	if exists && tat > now {
		from = tat
	}
	d, ok := mulNonNeg(n, ei)
	if !ok || from > math.MaxInt64-d {
		return math.MaxInt64, nil
	}
	return from + d, nil
}

// mulNonNeg is a·b for a, b ≥ 0, and whether it fits an int64.
func mulNonNeg(a, b int64) (int64, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a != 0 && b > math.MaxInt64/a {
		return 0, false
	}
	return a * b, true
}
