package decide

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The assignments in force never add up past the bucket's rate or its
// burst (one token a holder of one, past it), whatever the holders ask and
// in whatever order they report; each assignment's own rate is never
// faster than the part it was given; a holder alone that asks for more
// than the rate gets it to within 1%.
func TestSharesNeverAddUpPastTheBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(58, 1))
	for round := range 300 {
		rate := r.Int64N(200_000_000) + 1 // up to 200 a second, in millionths
		if round%3 == 0 {
			rate = r.Int64N(2_000_000) + 1 // slow: a few a second at most
		}
		burst := r.Int64N(20) + 1
		ttl := int64(r.IntN(3)+1) * 1_000_000_000
		d := &LeaseDemand{}
		now := int64(1_800_000_000_000_000_000)
		names := r.IntN(8) + 1
		for range 200 {
			now += r.Int64N(700_000_000)
			h := fmt.Sprintf("h%d", r.IntN(names))
			want := r.Int64N(300_000)
			if r.IntN(5) == 0 {
				want = 0
			}
			if err := d.ask([]byte(h), want, now+2*ttl, now); err != nil {
				t.Fatal(err)
			}
			sh := d.assign(h, rate, burst, ttl, now)
			if sh.Burst > 0 && (sh.PerFill < 1 || sh.Every < 1 || sh.Until != now+ttl && sh.Until <= now) {
				t.Fatalf("round %d: a share %+v", round, sh)
			}
			var sumRate, sumBurst, asking int64
			for i := range d.Holders {
				if s := &d.Holders[i].Share; s.inForce(now) {
					asking++
					sumRate += s.rate()
					sumBurst += s.Burst
				}
			}
			if sumRate > rate || sumBurst > max(burst, asking) {
				t.Fatalf("round %d at %d: in force %d millionths a second and %d tokens, of %d and %d (%d holding)",
					round, now, sumRate, sumBurst, rate, burst, asking)
			}
		}
	}
	// Alone, asking for more than all of it: within 1% of the rate.
	for _, rate := range []int64{999_999, 1_666_666, 10_000_000, 33_333_333, 100_000_000, 123_456_789} {
		d := &LeaseDemand{}
		d.ask([]byte("a"), rate, 2e9, 0)
		sh := d.assign("a", rate, 10, 1e9, 0)
		if got := sh.rate(); got > rate || got*100 < rate*99 {
			t.Errorf("a rate of %d millionths alone: %d every %d s (%d)", rate, sh.PerFill, sh.Every, got)
		}
	}
}
