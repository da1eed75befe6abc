package window

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestNewParams(t *testing.T) {
	for _, tc := range []struct {
		limit, seconds int64
		want           Params
		err            error
	}{
		{100, 60, Params{100, 60 * sec}, nil},
		{1, 1_000_000_000, Params{1, MaxWindow}, nil},
		{1, 1_000_000_001, Params{}, ErrWindowTooLong},
		{1, math.MaxInt64, Params{}, ErrWindowTooLong}, // would overflow ×10⁹
		{0, 60, Params{0, 60 * sec}, ErrLimit},
		{-1, 60, Params{-1, 60 * sec}, ErrLimit},
		{5, 0, Params{5, 0}, ErrWindow},
		{5, -3, Params{5, -3 * sec}, ErrWindow},
	} {
		got, err := NewParams(tc.limit, tc.seconds)
		if !errors.Is(err, tc.err) || (err == nil && got != tc.want) {
			t.Errorf("NewParams(%d, %d) = %+v, %v; want %+v, %v", tc.limit, tc.seconds, got, err, tc.want, tc.err)
		}
	}
}

// Every check refuses bad arguments with the same sentinels and leaves the
// key alone.
func TestCheckRejectsBadArguments(t *testing.T) {
	good := Params{Limit: 10, Window: sec}
	cases := []struct {
		name string
		now  int64
		p    Params
		cost int64
		err  error
	}{
		{"zero limit", t0, Params{0, sec}, 1, ErrLimit},
		{"negative window", t0, Params{10, -1}, 1, ErrWindow},
		{"window too long", t0, Params{10, MaxWindow + 1}, 1, ErrWindowTooLong},
		{"negative cost", t0, good, -1, ErrCost},
		{"before 1970", -1, good, 1, ErrTime},
		{"after 2116", MaxTime + 1, good, 1, ErrTime},
	}
	type checkFn func(now int64, p Params, cost int64) (bool, error)
	algos := map[string]checkFn{
		"counter": func(now int64, p Params, cost int64) (bool, error) {
			_, store, _, _, err := CounterState{}.Check(false, now, p, cost)
			return store, err
		},
		"log": func(now int64, p Params, cost int64) (bool, error) {
			_, store, _, _, err := LogState{}.Check(false, now, p, cost)
			return store, err
		},
		"fixed": func(now int64, p Params, cost int64) (bool, error) {
			_, store, _, _, err := FixedState{}.Check(false, now, p, cost)
			return store, err
		},
	}
	for name, check := range algos {
		for _, tc := range cases {
			store, err := check(tc.now, tc.p, tc.cost)
			if !errors.Is(err, tc.err) || store {
				t.Errorf("%s, %s: store=%v err=%v, want %v", name, tc.name, store, err, tc.err)
			}
		}
	}
	if _, _, _, _, err := (LogState{}).Check(false, t0, Params{MaxLogLimit + 1, sec}, 1); !errors.Is(err, ErrLogLimit) {
		t.Errorf("log with limit above MaxLogLimit: %v, want ErrLogLimit", err)
	}
	if _, _, _, _, err := (LogState{}).Check(false, t0, Params{MaxLogLimit, sec}, 1); err != nil {
		t.Errorf("log with limit MaxLogLimit: %v", err)
	}
}

func TestCheckRejectsBrokenState(t *testing.T) {
	p := Params{Limit: 10, Window: 10 * sec}
	for _, s := range []CounterState{
		{Window: p.Window, Start: t0 + 1},
		{Window: p.Window, Start: t0, Prev: -1},
		{Window: p.Window, Start: t0, Curr: -1},
		{Window: p.Window, Start: -p.Window},
	} {
		if _, _, _, _, err := s.Check(true, t0, p, 1); !errors.Is(err, ErrCorrupt) {
			t.Errorf("counter %+v: %v, want ErrCorrupt", s, err)
		}
	}
	for _, s := range []FixedState{
		{Window: p.Window, Start: t0 + 1},
		{Window: p.Window, Start: t0, Count: -1},
	} {
		if _, _, _, _, err := s.Check(true, t0, p, 1); !errors.Is(err, ErrCorrupt) {
			t.Errorf("fixed %+v: %v, want ErrCorrupt", s, err)
		}
	}
}

// At the edges of every range nothing overflows: the largest limit, window,
// instant and cost give the answers the definitions do.
func TestExtremes(t *testing.T) {
	big := Params{Limit: math.MaxInt64, Window: MaxWindow}
	now := MaxTime

	_, store, exp, res, err := CounterState{}.Check(false, now, big, math.MaxInt64)
	if err != nil || !store || res.Limited || res.Remaining != 0 {
		t.Fatalf("counter, whole limit at once: store=%v res=%+v err=%v", store, res, err)
	}
	if start := now - now%MaxWindow; exp != start+2*MaxWindow || res.ResetAfter != exp-now {
		t.Errorf("counter expiry %d, reset %d", exp, res.ResetAfter)
	}
	// One below the limit, then one unit more passes and two do not.
	s := CounterState{Window: MaxWindow, Start: now - now%MaxWindow, Curr: math.MaxInt64 - 1}
	if _, _, _, res, _ := s.Check(true, now, big, 2); !res.Limited || res.RetryAfter <= 0 {
		t.Errorf("counter over by one: %+v", res)
	}
	if _, _, _, res, _ := s.Check(true, now, big, 1); res.Limited {
		t.Errorf("counter exactly at the limit: %+v", res)
	}
	// A full previous sub-window and a huge limit: the retry is still exact.
	start := now - now%MaxWindow
	s = CounterState{Window: MaxWindow, Start: start, Prev: math.MaxInt64}
	_, _, _, res, _ = s.Check(true, start, big, 1)
	if !res.Limited {
		t.Fatalf("full previous sub-window at its start: %+v", res)
	}
	if _, _, _, r, _ := s.Check(true, start+res.RetryAfter, big, 1); r.Limited {
		t.Errorf("not passing after RetryAfter %d: %+v", res.RetryAfter, r)
	}
	if _, _, _, r, _ := s.Check(true, start+res.RetryAfter-1, big, 1); !r.Limited {
		t.Errorf("passing 1 ns before RetryAfter %d", res.RetryAfter)
	}

	_, store, _, res, err = FixedState{}.Check(false, now, big, math.MaxInt64)
	if err != nil || !store || res.Limited || res.Remaining != 0 {
		t.Errorf("fixed, whole limit at once: store=%v res=%+v err=%v", store, res, err)
	}
	f := FixedState{Window: MaxWindow, Start: now - now%MaxWindow, Count: math.MaxInt64}
	if _, _, _, res, _ := f.Check(true, now, big, math.MaxInt64); !res.Limited {
		t.Errorf("fixed, full, cost MaxInt64: %+v", res)
	}

	lp := Params{Limit: MaxLogLimit, Window: MaxWindow}
	_, store, _, res, err = LogState{}.Check(false, now, lp, math.MaxInt64)
	if err != nil || store || !res.Limited || res.RetryAfter != -1 || res.Remaining != MaxLogLimit {
		t.Errorf("log, cost MaxInt64: store=%v res=%+v err=%v", store, res, err)
	}
	l, store, exp, res, err := LogState{}.Check(false, now, lp, MaxLogLimit)
	if err != nil || !store || exp != now+MaxWindow || res.Remaining != 0 {
		t.Errorf("log, whole limit at once: store=%v exp=%d res=%+v err=%v", store, exp, res, err)
	}
	if _, _, _, res, _ := l.Check(true, now, lp, 1); res.RetryAfter != MaxWindow {
		t.Errorf("log, full: %+v, want retry after a whole window", res)
	}
}

// The sentinels' text states the bounds; keep it in step with the constants.
func TestErrorTextMatchesBounds(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{ErrWindowTooLong, strconv.FormatInt(MaxWindow/nsPerSecond, 10)},
		{ErrLogLimit, strconv.FormatInt(MaxLogLimit, 10)},
		{ErrTime, strconv.Itoa(1970 + int(MaxTime/(nsPerSecond*31_556_952)))}, // Gregorian years
	} {
		if !strings.Contains(tc.err.Error(), tc.want) || !strings.HasPrefix(tc.err.Error(), "window: ") {
			t.Errorf("%q should start with \"window: \" and mention %s", tc.err, tc.want)
		}
	}
}
