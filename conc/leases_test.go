package conc

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/limiter"
)

// step is one call in a scripted scenario, with the reply worked out by hand
// from the semantics in the doc comments.
type step struct {
	op    string // "acquire", "release", "renew", "view"
	at    int64  // offset from t0
	id    string
	limit int64
	lease int64

	want     limiter.Result // acquire
	wantOK   bool           // release, renew
	wantLive int            // view
	wantNext int64          // view
	wantLast int64          // view
}

func acquired(limit, remaining, lease int64) limiter.Result {
	return limiter.Result{Limit: limit, Remaining: remaining, RetryAfter: limiter.Never, ResetAfter: lease}
}

func limited(limit, retry, reset int64) limiter.Result {
	return limiter.Result{Limited: true, Limit: limit, RetryAfter: retry, ResetAfter: reset}
}

func TestScenarios(t *testing.T) {
	const s = second
	tests := []struct {
		name  string
		steps []step
	}{
		{"fill, reject, release, acquire again", []step{
			{op: "acquire", at: 0, id: "a", limit: 3, lease: 10 * s, want: acquired(3, 2, 10*s)},
			{op: "acquire", at: 1 * s, id: "b", limit: 3, lease: 10 * s, want: acquired(3, 1, 10*s)},
			{op: "acquire", at: 2 * s, id: "c", limit: 3, lease: 10 * s, want: acquired(3, 0, 10*s)},
			// Full: a slot frees when a ends at 10 s; the key empties when
			// c ends at 12 s.
			{op: "acquire", at: 3 * s, id: "d", limit: 3, lease: 10 * s, want: limited(3, 7*s, 9*s)},
			{op: "view", at: 3 * s, wantLive: 3, wantNext: 7 * s, wantLast: 9 * s},
			{op: "release", at: 4 * s, id: "b", wantOK: true},
			{op: "view", at: 4 * s, wantLive: 2, wantNext: 6 * s, wantLast: 8 * s},
			{op: "acquire", at: 4 * s, id: "d", limit: 3, lease: 10 * s, want: acquired(3, 0, 10*s)},
			{op: "acquire", at: 4 * s, id: "e", limit: 3, lease: 10 * s, want: limited(3, 6*s, 10*s)},
		}},
		{"expiry frees the slot at exactly the lease end", []step{
			{op: "acquire", at: 0, id: "a", limit: 1, lease: 10 * s, want: acquired(1, 0, 10*s)},
			{op: "acquire", at: 10*s - 1, id: "b", limit: 1, lease: 10 * s, want: limited(1, 1, 1)},
			{op: "view", at: 10*s - 1, wantLive: 1, wantNext: 1, wantLast: 1},
			{op: "view", at: 10 * s, wantLive: 0},
			{op: "acquire", at: 10 * s, id: "b", limit: 1, lease: 10 * s, want: acquired(1, 0, 10*s)},
			// a is gone, not merely outvoted: releasing it is a no-op.
			{op: "release", at: 10 * s, id: "a", wantOK: false},
		}},
		{"re-acquire at the limit refreshes and takes no slot", []step{
			{op: "acquire", at: 0, id: "a", limit: 2, lease: 10 * s, want: acquired(2, 1, 10*s)},
			{op: "acquire", at: 0, id: "b", limit: 2, lease: 10 * s, want: acquired(2, 0, 10*s)},
			{op: "acquire", at: 5 * s, id: "a", limit: 2, lease: 10 * s, want: acquired(2, 0, 10*s)},
			{op: "view", at: 5 * s, wantLive: 2, wantNext: 5 * s, wantLast: 10 * s},
			{op: "acquire", at: 5 * s, id: "c", limit: 2, lease: 10 * s, want: limited(2, 5*s, 10*s)},
			// b ended at 10 s; a now lasts until 15 s.
			{op: "acquire", at: 12 * s, id: "c", limit: 2, lease: 10 * s, want: acquired(2, 0, 10*s)},
			{op: "view", at: 12 * s, wantLive: 2, wantNext: 3 * s, wantLast: 10 * s},
		}},
		{"re-acquire with a shorter lease moves the expiry earlier", []step{
			{op: "acquire", at: 0, id: "a", limit: 2, lease: 60 * s, want: acquired(2, 1, 60*s)},
			{op: "acquire", at: 0, id: "b", limit: 2, lease: 30 * s, want: acquired(2, 0, 30*s)},
			{op: "acquire", at: 1 * s, id: "a", limit: 2, lease: 5 * s, want: acquired(2, 0, 5*s)},
			{op: "view", at: 1 * s, wantLive: 2, wantNext: 5 * s, wantLast: 29 * s},
			{op: "acquire", at: 6 * s, id: "c", limit: 2, lease: 5 * s, want: acquired(2, 0, 5*s)},
		}},
		{"renew", []step{
			{op: "acquire", at: 0, id: "a", limit: 5, lease: 5 * s, want: acquired(5, 4, 5*s)},
			{op: "renew", at: 4 * s, id: "a", lease: 5 * s, wantOK: true},
			{op: "view", at: 4 * s, wantLive: 1, wantNext: 5 * s, wantLast: 5 * s},
			{op: "renew", at: 9*s - 1, id: "a", lease: 1, wantOK: true},
			// Expired at 9 s: renewing is too late.
			{op: "renew", at: 9 * s, id: "a", lease: 5 * s, wantOK: false},
			{op: "view", at: 9 * s, wantLive: 0},
			{op: "renew", at: 9 * s, id: "never", lease: 5 * s, wantOK: false},
		}},
		{"release", []step{
			{op: "release", at: 0, id: "a", wantOK: false},
			{op: "acquire", at: 0, id: "a", limit: 5, lease: 5 * s, want: acquired(5, 4, 5*s)},
			{op: "release", at: 1 * s, id: "unknown", wantOK: false},
			{op: "release", at: 1 * s, id: "a", wantOK: true},
			{op: "release", at: 1 * s, id: "a", wantOK: false},
			{op: "acquire", at: 2 * s, id: "b", limit: 5, lease: 5 * s, want: acquired(5, 4, 5*s)},
			{op: "release", at: 7 * s, id: "b", wantOK: false},
		}},
		{"lowered limit waits for enough leases to end", []step{
			{op: "acquire", at: 0, id: "a", limit: 3, lease: 10 * s, want: acquired(3, 2, 10*s)},
			{op: "acquire", at: 1 * s, id: "b", limit: 3, lease: 10 * s, want: acquired(3, 1, 10*s)},
			{op: "acquire", at: 2 * s, id: "c", limit: 3, lease: 10 * s, want: acquired(3, 0, 10*s)},
			// Limit 1 needs all three gone: c ends at 12 s.
			{op: "acquire", at: 5 * s, id: "d", limit: 1, lease: 10 * s, want: limited(1, 7*s, 7*s)},
			// Limit 2 needs one live lease: b ends at 11 s.
			{op: "acquire", at: 5 * s, id: "d", limit: 2, lease: 10 * s, want: limited(2, 6*s, 7*s)},
			// A holder over the lowered limit still re-acquires.
			{op: "acquire", at: 5 * s, id: "a", limit: 1, lease: 10 * s, want: acquired(1, 0, 10*s)},
		}},
		{"equal expiries", []step{
			{op: "acquire", at: 0, id: "b", limit: 2, lease: 10 * s, want: acquired(2, 1, 10*s)},
			{op: "acquire", at: 0, id: "a", limit: 2, lease: 10 * s, want: acquired(2, 0, 10*s)},
			{op: "release", at: 1 * s, id: "b", wantOK: true},
			{op: "view", at: 1 * s, wantLive: 1, wantNext: 9 * s, wantLast: 9 * s},
			{op: "release", at: 1 * s, id: "a", wantOK: true},
			{op: "view", at: 1 * s, wantLive: 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l Leases
			for i, st := range tt.steps {
				now := t0 + st.at
				switch st.op {
				case "acquire":
					got, err := l.Acquire(now, st.limit, st.lease, id(st.id))
					if err != nil || got != st.want {
						t.Fatalf("step %d acquire %q: got %+v, %v; want %+v", i, st.id, got, err, st.want)
					}
				case "release":
					if got := l.Release(now, id(st.id)); got != st.wantOK {
						t.Fatalf("step %d release %q: got %v, want %v", i, st.id, got, st.wantOK)
					}
				case "renew":
					got, err := l.Renew(now, id(st.id), st.lease)
					if err != nil || got != st.wantOK {
						t.Fatalf("step %d renew %q: got %v, %v; want %v", i, st.id, got, err, st.wantOK)
					}
				case "view":
					live, next, last := l.View(now)
					if live != st.wantLive || next != st.wantNext || last != st.wantLast {
						t.Fatalf("step %d view: got %d %d %d; want %d %d %d",
							i, live, next, last, st.wantLive, st.wantNext, st.wantLast)
					}
					if l.Empty(now) != (st.wantLive == 0) {
						t.Fatalf("step %d: Empty(now) = %v with %d live", i, l.Empty(now), st.wantLive)
					}
				default:
					t.Fatalf("bad op %q", st.op)
				}
				checkInvariants(t, &l)
			}
		})
	}
}

func TestInvalidArguments(t *testing.T) {
	tests := []struct {
		name  string
		now   int64
		limit int64
		lease int64
		id    []byte
		want  error
	}{
		{"zero limit", t0, 0, second, id("a"), ErrLimitNotPositive},
		{"negative limit", t0, -1, second, id("a"), ErrLimitNotPositive},
		{"limit above max", t0, MaxLimit + 1, second, id("a"), ErrLimitTooLarge},
		{"zero lease", t0, 1, 0, id("a"), ErrLeaseNotPositive},
		{"negative lease", t0, 1, -second, id("a"), ErrLeaseNotPositive},
		{"id too long", t0, 1, second, longID(MaxRequestIDLen + 1), ErrRequestIDTooLong},
		{"expiry overflows", math.MaxInt64 - 9, 1, 10, id("a"), ErrOverflow},
		{"huge lease overflows", 1, 1, math.MaxInt64, id("a"), ErrOverflow},
		{"max limit is fine", t0, MaxLimit, second, id("a"), nil},
		{"max id length is fine", t0, 1, second, longID(MaxRequestIDLen), nil},
		{"empty id is fine", t0, 1, second, id(""), nil},
		{"expiry at MaxInt64 is fine", math.MaxInt64 - 10, 1, 10, id("a"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l Leases
			// An expired lease shows whether a failing call pruned anyway.
			if _, err := l.Acquire(math.MinInt64, 5, 1, id("old")); err != nil {
				t.Fatal(err)
			}
			_, err := l.Acquire(tt.now, tt.limit, tt.lease, tt.id)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Acquire: got %v, want %v", err, tt.want)
			}
			if tt.want != nil && l.Len() != 1 {
				t.Fatalf("failed Acquire changed the state: %d leases", l.Len())
			}
			if tt.want == nil {
				checkInvariants(t, &l)
				return
			}
			if tt.want == ErrLimitNotPositive || tt.want == ErrLimitTooLarge {
				return // Renew takes no limit
			}
			ok, err := l.Renew(tt.now, tt.id, tt.lease)
			if ok || !errors.Is(err, tt.want) {
				t.Fatalf("Renew: got %v, %v; want false, %v", ok, err, tt.want)
			}
			if l.Len() != 1 {
				t.Fatalf("failed Renew changed the state: %d leases", l.Len())
			}
		})
	}
}

func TestErrorMessagesMatchLimits(t *testing.T) {
	if !strings.Contains(ErrLimitTooLarge.Error(), strconv.Itoa(MaxLimit)) {
		t.Errorf("%q does not name MaxLimit %d", ErrLimitTooLarge, MaxLimit)
	}
	if !strings.Contains(ErrRequestIDTooLong.Error(), strconv.Itoa(MaxRequestIDLen)) {
		t.Errorf("%q does not name MaxRequestIDLen %d", ErrRequestIDTooLong, MaxRequestIDLen)
	}
}

func TestParams(t *testing.T) {
	if err := DefaultParams().Validate(); err != nil {
		t.Fatalf("DefaultParams invalid: %v", err)
	}
	if err := (Params{Limit: MaxLimit + 1, Lease: 1}).Validate(); !errors.Is(err, ErrLimitTooLarge) {
		t.Fatalf("got %v", err)
	}
	if err := (Params{Limit: 1}).Validate(); !errors.Is(err, ErrLeaseNotPositive) {
		t.Fatalf("got %v", err)
	}
}

func TestReleaseOfTooLongIDIsFalse(t *testing.T) {
	var l Leases
	if l.Release(t0, longID(MaxRequestIDLen+1)) {
		t.Fatal("released an id that cannot be held")
	}
}

func TestCallerBufferNotRetained(t *testing.T) {
	var l Leases
	buf := []byte("abc")
	if _, err := l.Acquire(t0, 2, second, buf); err != nil {
		t.Fatal(err)
	}
	copy(buf, "xyz") // the network layer reuses its buffers
	if !l.Release(t0, id("abc")) {
		t.Fatal("lease for abc lost after the caller's buffer changed")
	}
}

func TestExpireAtAndEmpty(t *testing.T) {
	var l Leases
	if !l.Empty(math.MinInt64) || l.ExpireAt() != math.MinInt64 {
		t.Fatalf("zero Leases: Empty %v, ExpireAt %d", l.Empty(math.MinInt64), l.ExpireAt())
	}
	mustAcquire(t, &l, t0, 3, 5*second, "a")
	mustAcquire(t, &l, t0, 3, 9*second, "b")
	mustAcquire(t, &l, t0, 3, 7*second, "c")
	if got := l.ExpireAt(); got != t0+9*second {
		t.Fatalf("ExpireAt %d, want t0+9s", got-t0)
	}
	if l.Empty(t0 + 9*second - 1) {
		t.Fatal("empty before the last lease ends")
	}
	if !l.Empty(t0 + 9*second) {
		t.Fatal("not empty when the last lease ends")
	}
	l.Release(t0, id("b"))
	if got := l.ExpireAt(); got != t0+7*second {
		t.Fatalf("after releasing the latest: ExpireAt %d, want t0+7s", got-t0)
	}
	l.Release(t0, id("a"))
	l.Release(t0, id("c"))
	if !l.Empty(t0) || l.ExpireAt() != math.MinInt64 || l.buf != nil {
		t.Fatalf("all released: Empty %v, ExpireAt %d, slice %v", l.Empty(t0), l.ExpireAt(), l.buf)
	}
}

func TestIndexComesAndGoes(t *testing.T) {
	var l Leases
	const n = 3 * indexOn
	ids := make([][]byte, n)
	for i := range ids {
		ids[i] = []byte{'r', byte(i), byte(i >> 8)}
		// Expiries out of insertion order so moves go both ways.
		mustAcquire(t, &l, t0, n, int64(1+(i*37)%n)*second, string(ids[i]))
		checkInvariants(t, &l)
	}
	if l.index == nil {
		t.Fatal("no index at many leases")
	}
	for i := range ids {
		if ok, err := l.Renew(t0+1, ids[i], int64(1+(i*53)%n)*second); !ok || err != nil {
			t.Fatalf("renew %d: %v %v", i, ok, err)
		}
		checkInvariants(t, &l)
	}
	for i := range ids {
		if !l.Release(t0+1, ids[i]) {
			t.Fatalf("release %d failed", i)
		}
		checkInvariants(t, &l)
	}
	if l.index != nil || cap(l.buf) != 0 {
		t.Fatalf("empty state keeps index %v or capacity %d", l.index != nil, cap(l.buf))
	}
}

func TestMemoryShrinks(t *testing.T) {
	var l Leases
	for i := range 1000 {
		mustAcquire(t, &l, t0, 1000, second, string(rune(0x100+i)))
	}
	for i := range 990 {
		l.Release(t0, []byte(string(rune(0x100+i))))
	}
	if c := cap(l.buf); c > 4*10 && c > minShrinkCap {
		t.Fatalf("10 leases keep a capacity of %d", c)
	}
	// Expiry shrinks too.
	l.Acquire(t0+second, 1000, second, id("new"))
	if l.Len() != 1 {
		t.Fatalf("%d leases after all others expired", l.Len())
	}
	checkInvariants(t, &l)
}

func mustAcquire(t *testing.T, l *Leases, now, limit, lease int64, s string) {
	t.Helper()
	r, err := l.Acquire(now, limit, lease, id(s))
	if err != nil || r.Limited {
		t.Fatalf("acquire %q: %+v %v", s, r, err)
	}
}
