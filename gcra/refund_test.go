package gcra

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Random histories: other callers' admissions around one held charge of
// n units, then a refund keeping m. The refunded TAT, seen at the refund's
// instant, is never below the replay of the same admissions with m units
// charged instead of n (never laxer), and equals it when nothing else
// touched the key after the charge (exact).
func TestRefundNeverLaxerThanTheReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20000 {
		l := Limit{MaxBurst: rng.Int64N(20), Count: 1 + rng.Int64N(10), Period: 1 + rng.Int64N(1000)}
		if l.Validate() != nil {
			continue
		}
		ei := l.EmissionInterval()
		type event struct {
			at, cost int64
			ours     bool
		}
		var events []event
		now := rng.Int64N(1000)
		tat, exists := int64(0), false
		// Others before.
		for range rng.IntN(4) {
			now += rng.Int64N(3 * ei * 3)
			c := rng.Int64N(3)
			if nt, store, _, err := Throttle(tat, exists, now, l, c); err == nil && store {
				tat, exists = nt, true
				events = append(events, event{now, c, false})
			}
		}
		// Our charge.
		now += rng.Int64N(2 * ei)
		n := 1 + rng.Int64N(l.MaxBurst+1)
		nt, store, _, err := Throttle(tat, exists, now, l, n)
		if err != nil || !store {
			continue
		}
		base := now
		if exists && tat > now {
			base = tat
		}
		tat, exists = nt, true
		events = append(events, event{now, n, true})
		touched := false
		for range rng.IntN(4) {
			now += rng.Int64N(4 * ei * (l.MaxBurst + 1))
			c := rng.Int64N(3)
			if nt, store, _, err := Throttle(tat, exists, now, l, c); err == nil && store {
				tat = nt
				touched = true
				events = append(events, event{now, c, false})
			}
		}
		now += rng.Int64N(4 * ei * (l.MaxBurst + 1))
		kept := rng.Int64N(n + 1)
		refunded, _ := Refund(tat, base, n, kept, ei, now)

		// The replay: the same admissions, ours with kept units.
		replay, rexists := int64(0), false
		for _, e := range events {
			c := e.cost
			if e.ours {
				c = kept
			}
			replay, _ = Force(replay, rexists, e.at, c, ei)
			rexists = true
		}
		got, want := max(refunded, now), max(replay, now)
		if got < want {
			t.Fatalf("trial %d: refunded TAT %d (seen at %d: %d) laxer than the replay's %d; events %+v, n %d kept %d base %d",
				trial, refunded, now, got, want, events, n, kept, base)
		}
		if !touched && got != want {
			t.Fatalf("trial %d: untouched, refunded %d but the replay is %d; events %+v, n %d kept %d", trial, got, want, events, n, kept)
		}
	}
}

func TestForce(t *testing.T) {
	if got, err := Force(0, false, 100, 3, 10); err != nil || got != 130 {
		t.Fatalf("fresh key: %d %v", got, err)
	}
	if got, err := Force(500, true, 100, 3, 10); err != nil || got != 530 {
		t.Fatalf("past its limit: %d %v", got, err)
	}
	// Past the int64 range the charge saturates: the key is refused until
	// the far future, never charged nothing.
	for _, c := range [][2]int64{{1 << 62, 10}, {math.MaxInt64, 1}, {2e9, 6e9}} { // n, ei: the last a 2e9 settle of 10 a minute
		tat, err := Force(500, true, 100, c[0], c[1])
		if err != nil || tat != math.MaxInt64 {
			t.Fatalf("a charge of %d past the range: %d %v", c[0], tat, err)
		}
		l := Limit{MaxBurst: 1_000_000, Count: 1_000_000, Period: 1e9}
		if _, store, r, err := Throttle(tat, true, 1e18, l, 1); err != nil || store || !r.Limited {
			t.Fatalf("the key after a saturated charge: %+v store %v %v", r, store, err)
		}
	}
}

// Several held charges on one key, refunded in any order, between other
// callers' admissions and other refunds: the key is never laxer than the
// replay of every admission with each refunded charge's kept units.
func TestRefundsOfSeveralChargesNeverLaxer(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 20000 {
		l := Limit{MaxBurst: rng.Int64N(30), Count: 1 + rng.Int64N(10), Period: 1 + rng.Int64N(1000)}
		if l.Validate() != nil {
			continue
		}
		ei := l.EmissionInterval()
		type charge struct {
			at, n, base, kept int64
			held, settled     bool
		}
		var events []*charge
		tat, exists := int64(0), false
		now := rng.Int64N(1000)
		for range 4 + rng.IntN(12) {
			now += rng.Int64N(ei * (l.MaxBurst + 1))
			var open []*charge
			for _, e := range events {
				if e.held && !e.settled {
					open = append(open, e)
				}
			}
			if len(open) > 0 && rng.IntN(3) == 0 {
				e := open[rng.IntN(len(open))]
				e.kept, e.settled = rng.Int64N(e.n+1), true
				tat, _ = Refund(tat, e.base, e.n, e.kept, ei, now)
				continue
			}
			n := 1 + rng.Int64N(3)
			nt, store, _, err := Throttle(tat, exists, now, l, n)
			if err != nil || !store {
				continue
			}
			base := now
			if exists && tat > now {
				base = tat
			}
			tat, exists = nt, true
			events = append(events, &charge{at: now, n: n, base: base, kept: n, held: rng.IntN(2) == 0})
		}
		replay, rexists := int64(0), false
		for _, e := range events {
			replay, _ = Force(replay, rexists, e.at, e.kept, ei)
			rexists = true
		}
		if max(tat, now) < max(replay, now) {
			t.Fatalf("trial %d: refunded TAT %d laxer than the replay's %d at %d", trial, tat, replay, now)
		}
	}
}
