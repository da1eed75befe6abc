package gcra

import (
	"errors"
	"math"
	"testing"

	"github.com/sluice-rl/sluice/limiter"
)

const (
	ms  = int64(1_000_000)
	sec = int64(1_000_000_000)
	// t0 is an arbitrary fixed instant (2023-11-14T22:13:20Z).
	t0 = 1_700_000_000 * sec
)

// The example from the redis-cell README: CL.THROTTLE user123 15 30 60.
func TestReadmeExample(t *testing.T) {
	l := Limit{MaxBurst: 15, Count: 30, Period: 60 * sec}
	var k key
	if got, want := k.throttle(t, t0, l, 1).Reply(), [5]int64{0, 16, 15, -1, 2}; got != want {
		t.Fatalf("first call: got %v, want %v", got, want)
	}
	if got, want := k.throttle(t, t0, l, 1).Reply(), [5]int64{0, 16, 14, -1, 4}; got != want {
		t.Fatalf("second call: got %v, want %v", got, want)
	}
}

// The cases of redis-cell's own it_rate_limits test (limit 5, 1 per second),
// replayed on one key.
func TestRedisCellTable(t *testing.T) {
	l := Limit{MaxBurst: 4, Count: 1, Period: sec}
	never := int64(limiter.Never)
	cases := []struct {
		at, quantity, remaining, reset, retry int64
		limited                               bool
	}{
		{0, 6, 5, 0, never, true}, // larger than the limit: never passes
		{0, 1, 4, 1 * sec, never, false},
		{0, 1, 3, 2 * sec, never, false},
		{0, 1, 2, 3 * sec, never, false},
		{0, 1, 1, 4 * sec, never, false},
		{0, 1, 0, 5 * sec, never, false},
		{0, 1, 0, 5 * sec, 1 * sec, true},
		{3000 * ms, 1, 2, 3000 * ms, never, false},
		{3100 * ms, 1, 1, 3900 * ms, never, false},
		{4000 * ms, 1, 1, 4000 * ms, never, false},
		{8000 * ms, 1, 4, 1000 * ms, never, false},
		{9500 * ms, 1, 4, 1000 * ms, never, false},
		{9500 * ms, 0, 4, 1 * sec, never, false}, // peek
		{9500 * ms, 2, 2, 3 * sec, never, false},
		{9500 * ms, 5, 2, 3 * sec, 3 * sec, true},
	}
	var k key
	for i, c := range cases {
		r := k.throttle(t, t0+c.at, l, c.quantity)
		want := limiter.Result{Limited: c.limited, Limit: 5, Remaining: c.remaining, RetryAfter: c.retry, ResetAfter: c.reset}
		if r != want {
			t.Fatalf("case %d: got %+v, want %+v", i, r, want)
		}
	}
}

func TestBurstExhaustionAndRecovery(t *testing.T) {
	l := Limit{MaxBurst: 15, Count: 30, Period: 60 * sec} // ei = 2 s, dvt = 32 s
	var k key
	for i := int64(1); i <= 16; i++ {
		r := k.throttle(t, t0, l, 1)
		want := limiter.Result{Limit: 16, Remaining: 16 - i, RetryAfter: limiter.Never, ResetAfter: 2 * sec * i}
		if r != want {
			t.Fatalf("request %d: got %+v, want %+v", i, r, want)
		}
	}
	r := k.throttle(t, t0, l, 1)
	if want := (limiter.Result{Limited: true, Limit: 16, Remaining: 0, RetryAfter: 2 * sec, ResetAfter: 32 * sec}); r != want {
		t.Fatalf("17th: got %+v, want %+v", r, want)
	}
	if got, want := r.Reply(), [5]int64{1, 16, 0, 2, 32}; got != want {
		t.Fatalf("17th reply: got %v, want %v", got, want)
	}
	// One nanosecond early is still refused, with one nanosecond to go.
	r = k.throttle(t, t0+2*sec-1, l, 1)
	if !r.Limited || r.RetryAfter != 1 || r.ResetAfter != 30*sec+1 {
		t.Fatalf("1 ns early: got %+v", r)
	}
	// Waiting exactly one emission interval frees exactly one unit.
	r = k.throttle(t, t0+2*sec, l, 1)
	if want := (limiter.Result{Limit: 16, Remaining: 0, RetryAfter: limiter.Never, ResetAfter: 32 * sec}); r != want {
		t.Fatalf("after ei: got %+v, want %+v", r, want)
	}
	// Once the whole window has passed the key has expired: a fresh start.
	r = k.throttle(t, t0+2*sec+32*sec, l, 1)
	if k.tat != t0+36*sec || r.Remaining != 15 || r.ResetAfter != 2*sec {
		t.Fatalf("after reset: tat %d, got %+v", k.tat, r)
	}
}

// Reply rounds a duration up to the next second only when the sub-second part
// is at least 1 ms; these limits put ResetAfter and RetryAfter on either side.
func TestRoundingEdges(t *testing.T) {
	cases := []struct {
		period      int64
		wantSeconds int64
	}{
		{999_999, 0},
		{1 * ms, 1},
		{1 * sec, 1},
		{1*sec + 999_999, 1},
		{1*sec + 1*ms, 2},
		{2*sec - 1, 2},
	}
	for _, c := range cases {
		l := Limit{MaxBurst: 0, Count: 1, Period: c.period}
		var k key
		first := k.throttle(t, t0, l, 1)
		second := k.throttle(t, t0, l, 1)
		if first.ResetAfter != c.period || second.RetryAfter != c.period {
			t.Fatalf("period %d: first %+v second %+v", c.period, first, second)
		}
		if got, want := first.Reply(), [5]int64{0, 1, 0, -1, c.wantSeconds}; got != want {
			t.Errorf("period %d allowed: got %v, want %v", c.period, got, want)
		}
		if got, want := second.Reply(), [5]int64{1, 1, 0, c.wantSeconds, c.wantSeconds}; got != want {
			t.Errorf("period %d limited: got %v, want %v", c.period, got, want)
		}
	}
}

func TestPeekNeverStores(t *testing.T) {
	l := Limit{MaxBurst: 2, Count: 1, Period: sec}

	// Absent key: a full bucket is reported and no key is created.
	newTAT, store, r, err := Throttle(0, false, t0, l, 0)
	if err != nil || store || newTAT != 0 {
		t.Fatalf("peek absent: newTAT %d store %v err %v", newTAT, store, err)
	}
	if got, want := r.Reply(), [5]int64{0, 3, 3, -1, 0}; got != want {
		t.Fatalf("peek absent: got %v, want %v", got, want)
	}

	// Existing key: reports its state and leaves the TAT alone.
	tat := t0 + 2*sec
	newTAT, store, r, err = Throttle(tat, true, t0+500*ms, l, 0)
	if err != nil || store || newTAT != tat {
		t.Fatalf("peek existing: newTAT %d store %v err %v", newTAT, store, err)
	}
	if want := (limiter.Result{Limit: 3, Remaining: 1, RetryAfter: limiter.Never, ResetAfter: 1500 * ms}); r != want {
		t.Fatalf("peek existing: got %+v, want %+v", r, want)
	}

	// Full key: a peek is still allowed, since it costs nothing.
	tat = t0 + 3*sec
	_, store, r, _ = Throttle(tat, true, t0, l, 0)
	if store || r.Limited || r.Remaining != 0 || r.ResetAfter != 3*sec {
		t.Fatalf("peek full: store %v got %+v", store, r)
	}
}

func TestQuantityAtAndAboveLimit(t *testing.T) {
	l := Limit{MaxBurst: 9, Count: 10, Period: sec} // ei = 100 ms, limit 10
	var k key
	r := k.throttle(t, t0, l, 10)
	if want := (limiter.Result{Limit: 10, Remaining: 0, RetryAfter: limiter.Never, ResetAfter: sec}); r != want {
		t.Fatalf("quantity == limit: got %+v, want %+v", r, want)
	}
	r = k.throttle(t, t0, l, 1)
	if !r.Limited || r.RetryAfter != 100*ms {
		t.Fatalf("after full take: got %+v", r)
	}

	for _, q := range []int64{11, 1 << 40, math.MaxInt64} {
		var fresh key
		r := fresh.throttle(t, t0, l, q)
		if want := (limiter.Result{Limited: true, Limit: 10, Remaining: 10, RetryAfter: limiter.Never, ResetAfter: 0}); r != want {
			t.Fatalf("quantity %d on empty key: got %+v, want %+v", q, r, want)
		}
		if fresh.exists {
			t.Fatalf("quantity %d created the key", q)
		}
	}
	// On a half-used key the over-limit request reports the key's state.
	r = (&key{tat: t0 + 400*ms, exists: true}).throttle(t, t0, l, 11)
	if want := (limiter.Result{Limited: true, Limit: 10, Remaining: 6, RetryAfter: limiter.Never, ResetAfter: 400 * ms}); r != want {
		t.Fatalf("quantity 11 on used key: got %+v, want %+v", r, want)
	}
}

// A TAT in the past (a key not yet reaped) counts as an empty bucket; redis-cell
// would report a negative reset_after and more remaining than the limit here.
func TestStaleTAT(t *testing.T) {
	l := Limit{MaxBurst: 4, Count: 1, Period: sec}
	_, store, r, err := Throttle(t0-10*sec, true, t0, l, 6)
	if err != nil || store {
		t.Fatalf("store %v err %v", store, err)
	}
	if want := (limiter.Result{Limited: true, Limit: 5, Remaining: 5, RetryAfter: limiter.Never, ResetAfter: 0}); r != want {
		t.Fatalf("got %+v, want %+v", r, want)
	}
	newTAT, store, r, _ := Throttle(t0-10*sec, true, t0, l, 1)
	if !store || newTAT != t0+sec || r.Remaining != 4 {
		t.Fatalf("allowed on stale: newTAT %d store %v %+v", newTAT, store, r)
	}
}

func TestHighRates(t *testing.T) {
	t.Run("1e6 per second", func(t *testing.T) {
		l := Limit{MaxBurst: 999, Count: 1_000_000, Period: sec} // ei = 1 µs, dvt = 1 ms
		var k key
		for i := int64(1); i <= 1000; i++ {
			r := k.throttle(t, t0, l, 1)
			if r.Limited || r.Remaining != 1000-i || r.ResetAfter != 1000*i {
				t.Fatalf("request %d: %+v", i, r)
			}
		}
		r := k.throttle(t, t0, l, 1)
		if !r.Limited || r.RetryAfter != 1000 || r.ResetAfter != ms {
			t.Fatalf("1001st: %+v", r)
		}
		if r := k.throttle(t, t0+1000, l, 1); r.Limited {
			t.Fatalf("after 1 µs: %+v", r)
		}
	})
	t.Run("1e9 per second", func(t *testing.T) {
		l := Limit{MaxBurst: 0, Count: 1_000_000_000, Period: sec} // ei = 1 ns
		var k key
		if r := k.throttle(t, t0, l, 1); r.Limited || r.ResetAfter != 1 || r.Remaining != 0 {
			t.Fatalf("first: %+v", r)
		}
		if r := k.throttle(t, t0, l, 1); !r.Limited || r.RetryAfter != 1 {
			t.Fatalf("second: %+v", r)
		}
		if r := k.throttle(t, t0+1, l, 1); r.Limited {
			t.Fatalf("1 ns later: %+v", r)
		}
	})
	t.Run("emission interval not a whole microsecond", func(t *testing.T) {
		// 1e9 / 666_667 = 1499.99… → 1499 ns. redis-cell divides by whole
		// microseconds (1) and would report 23 remaining of 16.
		l := Limit{MaxBurst: 15, Count: 666_667, Period: sec}
		var k key
		r := k.throttle(t, t0, l, 1)
		if r.Remaining != 15 || r.ResetAfter != 1499 {
			t.Fatalf("got %+v", r)
		}
	})
}

// The limit is not stored, so a new one reinterprets the same TAT.
func TestParameterChangeReusesTAT(t *testing.T) {
	a := Limit{MaxBurst: 15, Count: 30, Period: 60 * sec} // ei 2 s
	var k key
	for range 10 {
		k.throttle(t, t0, a, 1)
	}
	if k.tat != t0+20*sec {
		t.Fatalf("tat after 10 × 2 s: %d", k.tat-t0)
	}

	// dvt 5 s: 20 s of lead is far over; 16 s until one 1 s unit fits.
	b := Limit{MaxBurst: 4, Count: 1, Period: sec}
	if r := k.throttle(t, t0, b, 1); r != (limiter.Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 16 * sec, ResetAfter: 20 * sec}) {
		t.Fatalf("smaller limit: %+v", r)
	}
	// Even a peek is refused: the bucket is over its new capacity.
	if r := k.throttle(t, t0, b, 0); !r.Limited || r.RetryAfter != 15*sec {
		t.Fatalf("smaller limit peek: %+v", r)
	}
	// dvt 20 s, ei 100 ms: just 100 ms short.
	c := Limit{MaxBurst: 199, Count: 10, Period: sec}
	if r := k.throttle(t, t0, c, 1); !r.Limited || r.RetryAfter != 100*ms || r.Remaining != 0 {
		t.Fatalf("equal window: %+v", r)
	}
	// dvt 30 s: fits, and TAT moves on from the old one.
	d := Limit{MaxBurst: 299, Count: 10, Period: sec}
	r := k.throttle(t, t0, d, 1)
	if r.Limited || r.Remaining != 99 || r.ResetAfter != 20*sec+100*ms || k.tat != t0+20*sec+100*ms {
		t.Fatalf("larger limit: %+v tat %d", r, k.tat-t0)
	}
	if r.Limit != 300 {
		t.Fatalf("limit: %d", r.Limit)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		l    Limit
		want error
	}{
		{Limit{0, 1, 1}, nil},
		{Limit{15, 30, 60 * sec}, nil},
		{Limit{math.MaxInt64 - 1, 1, 1}, nil},         // dvt = MaxInt64 exactly
		{Limit{math.MaxInt64/2 - 1, 1, 2}, nil},       // dvt = MaxInt64 - 1
		{Limit{0, 1, math.MaxInt64}, nil},             // ~292 years
		{Limit{0, 1_000_000_000, 1_000_000_000}, nil}, // ei = 1 ns
		{Limit{-1, 1, 1}, ErrNegativeLimit},
		{Limit{0, -1, 1}, ErrNegativeLimit},
		{Limit{0, 1, -1}, ErrNegativeLimit},
		{Limit{0, 0, -1}, ErrNegativeLimit},
		{Limit{0, 0, 1}, ErrZeroRate},
		{Limit{0, 1, 0}, ErrZeroRate},
		{Limit{0, 0, 0}, ErrZeroRate},
		{Limit{0, 2, 1}, ErrRateTooHigh},
		{Limit{0, 2_000_000_000, 1_000_000_000}, ErrRateTooHigh}, // 2e9 per second
		{Limit{math.MaxInt64, 1, 1}, ErrBurstTooLarge},           // limit itself overflows
		{Limit{math.MaxInt64 / 2, 1, 2}, ErrBurstTooLarge},
		{Limit{1, 1, math.MaxInt64}, ErrBurstTooLarge},
	}
	for _, c := range cases {
		if err := c.l.Validate(); err != c.want {
			t.Errorf("%+v: got %v, want %v", c.l, err, c.want)
		}
		if c.want == nil {
			continue
		}
		if _, store, _, err := Throttle(t0, true, t0, c.l, 1); !errors.Is(err, c.want) || store {
			t.Errorf("Throttle with %+v: store %v err %v, want %v", c.l, store, err, c.want)
		}
	}
}

func TestThrottleInputErrors(t *testing.T) {
	l := Limit{MaxBurst: 1, Count: 1, Period: sec}
	if _, store, _, err := Throttle(0, false, t0, l, -1); err != ErrNegativeQuantity || store {
		t.Errorf("negative quantity: store %v err %v", store, err)
	}
	if _, store, _, err := Throttle(0, false, -1, l, 1); err != ErrNegativeNow || store {
		t.Errorf("negative now: store %v err %v", store, err)
	}
	// dvt = MaxInt64: the new TAT cannot be represented.
	huge := Limit{MaxBurst: math.MaxInt64 - 1, Count: 1, Period: 1}
	if _, store, _, err := Throttle(0, false, t0, huge, math.MaxInt64-t0+1); err != ErrTimeOverflow || store {
		t.Errorf("TAT overflow: store %v err %v", store, err)
	}
	// Up to the last representable instant is fine.
	newTAT, store, _, err := Throttle(0, false, t0, huge, math.MaxInt64-t0)
	if err != nil || !store || newTAT != math.MaxInt64 {
		t.Errorf("TAT at MaxInt64: newTAT %d store %v err %v", newTAT, store, err)
	}
	// A peek needs no new TAT, so it cannot overflow.
	if _, _, r, err := Throttle(math.MaxInt64, true, t0, huge, 0); err != nil || r.Limited {
		t.Errorf("peek with huge TAT: %+v %v", r, err)
	}
}

func TestEmissionInterval(t *testing.T) {
	for _, c := range []struct {
		l    Limit
		want int64
	}{
		{Limit{0, 30, 60 * sec}, 2 * sec},
		{Limit{0, 3, sec}, 333_333_333},
		{Limit{0, 0, sec}, 0},
	} {
		if got := c.l.EmissionInterval(); got != c.want {
			t.Errorf("%+v: got %d, want %d", c.l, got, c.want)
		}
	}
}

// Without exists the tat argument is garbage and must be ignored.
func TestAbsentKeyIgnoresTAT(t *testing.T) {
	l := Limit{MaxBurst: 4, Count: 1, Period: sec}
	newTAT, store, r, err := Throttle(t0+100*sec, false, t0, l, 1)
	if err != nil || !store || newTAT != t0+sec {
		t.Fatalf("newTAT %d store %v err %v", newTAT-t0, store, err)
	}
	if want := (limiter.Result{Limit: 5, Remaining: 4, RetryAfter: limiter.Never, ResetAfter: sec}); r != want {
		t.Fatalf("got %+v, want %+v", r, want)
	}
}

// The policy a limit advertises holds what it reports remaining and never
// promises more than its rate.
func TestPolicyWindow(t *testing.T) {
	for _, tc := range []struct {
		l    Limit
		want int64
	}{
		{Limit{MaxBurst: 20, Count: 10, Period: 1e9}, 3},   // 21 per 2.1 s → 21 per 3 s
		{Limit{MaxBurst: 9, Count: 10, Period: 1e9}, 1},    // 10 per second
		{Limit{MaxBurst: 0, Count: 10, Period: 1e9}, 1},    // 1 per 0.1 s → 1 per second
		{Limit{MaxBurst: 59, Count: 60, Period: 60e9}, 60}, // 60 a minute
		{Limit{MaxBurst: 0, Count: 0, Period: 1e9}, 0},     // invalid
	} {
		w := tc.l.PolicyWindow()
		if w != tc.want {
			t.Errorf("%+v: window %d, want %d", tc.l, w, tc.want)
		}
		if w > 0 && (tc.l.MaxBurst+1)*tc.l.Period > w*1e9*tc.l.Count {
			t.Errorf("%+v: %d per %d s promises more than the rate", tc.l, tc.l.MaxBurst+1, w)
		}
	}
}
