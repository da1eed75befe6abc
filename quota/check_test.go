package quota

import (
	"errors"
	"math"
	"testing"

	"github.com/sluice-rl/sluice/limiter"
)

type step struct {
	now       int64
	cost      int64
	limited   bool
	remaining int64
	retry     int64 // limiter.Never or ns
	store     bool
}

// runSteps drives one key through Check, storing when told to.
func runSteps(t *testing.T, name string, sch Schedule, limit int64, steps []step) State {
	t.Helper()
	var st State
	exists := false
	for i, s := range steps {
		next, store, res, err := Check(st, exists, s.now, limit, sch, s.cost)
		if err != nil {
			t.Fatalf("%s step %d: %v", name, i, err)
		}
		if res.Limited != s.limited || res.Remaining != s.remaining || res.RetryAfter != s.retry ||
			res.Limit != limit || store != s.store || res.ResetAfter != next.End-s.now {
			t.Errorf("%s step %d: got %+v store %v, want limited %v remaining %d retry %d store %v",
				name, i, res, store, s.limited, s.remaining, s.retry, s.store)
		}
		if store {
			st, exists = next, true
		}
	}
	return st
}

func TestCheckCounts(t *testing.T) {
	day := mustSchedule(t, Day, none, "UTC")
	t0 := utc(2024, 5, 17, 10, 0, 0, 0)
	midnight := utc(2024, 5, 18, 0, 0, 0, 0)
	st := runSteps(t, "daily 3", day, 3, []step{
		{t0, 0, false, 3, limiter.Never, false},                          // peek on a missing key creates nothing
		{t0, 1, false, 2, limiter.Never, true},                           //
		{t0 + 1, 2, false, 0, limiter.Never, true},                       //
		{t0 + 2, 1, true, 0, midnight - (t0 + 2), false},                 // refused, not counted
		{t0 + 3, 4, true, 0, limiter.Never, false},                       // more than the limit: never
		{t0 + 4, 0, false, 0, limiter.Never, false},                      // a peek at exactly the limit passes
		{midnight - 1, 1, true, 0, 1, false},                             // last ns of the period
		{midnight, 0, false, 3, limiter.Never, false},                    // peek sees the new day
		{midnight, 3, false, 0, limiter.Never, true},                     // new day, full quota
		{midnight + 1, 0, false, 0, limiter.Never, false},                // peek does not consume
		{utc(2024, 5, 25, 0, 0, 0, 0), 1, false, 2, limiter.Never, true}, // days later
	})
	if st.Used != 1 || st.Start != utc(2024, 5, 25, 0, 0, 0, 0) || st.Limit != 3 {
		t.Errorf("final state %+v", st)
	}

	// A refused request on a missing key (cost > limit) creates nothing.
	runSteps(t, "too big", day, 2, []step{{t0, 3, true, 2, limiter.Never, false}})
	// Limit 0 refuses everything but a peek.
	runSteps(t, "limit 0", day, 0, []step{{t0, 0, false, 0, limiter.Never, false}, {t0, 1, true, 0, limiter.Never, false}})
}

func TestCheckErrors(t *testing.T) {
	day := mustSchedule(t, Day, none, "UTC")
	for _, tc := range []struct {
		name             string
		now, limit, cost int64
		sch              Schedule
		want             error
	}{
		{"negative limit", 0, -1, 1, day, ErrNegative},
		{"negative cost", 0, 1, -1, day, ErrNegative},
		{"unbuilt schedule", 0, 1, 1, Schedule{Period: Day, Zone: "UTC"}, ErrNoZone},
		{"before 1970", -1, 1, 1, day, ErrOutOfRange},
		{"after MaxInstant", MaxInstant + 1, 1, 1, day, ErrOutOfRange},
	} {
		if _, store, _, err := Check(State{}, false, tc.now, tc.limit, tc.sch, tc.cost); !errors.Is(err, tc.want) || store {
			t.Errorf("%s: err %v store %v, want %v", tc.name, err, store, tc.want)
		}
	}
}

// stored builds the state Check leaves after consuming used units at now.
func stored(t *testing.T, sch Schedule, limit, used, now int64) State {
	t.Helper()
	st, store, _, err := Check(State{}, false, now, limit, sch, used)
	if err != nil || !store {
		t.Fatalf("stored: %v %v", err, store)
	}
	return st
}

func TestCheckScheduleChange(t *testing.T) {
	now := utc(2024, 5, 17, 10, 0, 0, 0)
	day := mustSchedule(t, Day, none, "UTC")
	month := mustSchedule(t, Month, none, "UTC")
	for _, tc := range []struct {
		name       string
		from, to   Schedule
		now        int64
		keepUsed   bool
		start, end int64
	}{
		// Today's usage lies inside this month: it counts against the month.
		{"day to month keeps", day, month, now, true, utc(2024, 5, 1, 0, 0, 0, 0), utc(2024, 6, 1, 0, 0, 0, 0)},
		// The month's usage may predate today: start afresh.
		{"month to day resets", month, day, now, false, utc(2024, 5, 17, 0, 0, 0, 0), utc(2024, 5, 18, 0, 0, 0, 0)},
		// New York's day started at 04:00Z, after the UTC day began.
		{"UTC to New York later start resets", day, mustSchedule(t, Day, none, "America/New_York"), now, false,
			utc(2024, 5, 17, 4, 0, 0, 0), utc(2024, 5, 18, 4, 0, 0, 0)},
		// At 03:00Z New York is still on May 16, which began before the UTC day.
		{"UTC to New York earlier start keeps", day, mustSchedule(t, Day, none, "America/New_York"), utc(2024, 5, 17, 3, 0, 0, 0), true,
			utc(2024, 5, 16, 4, 0, 0, 0), utc(2024, 5, 17, 4, 0, 0, 0)},
		// Different anchors with the same phase give the same period.
		{"same phase other anchor keeps", mustSchedule(t, Month, utc(2024, 1, 17, 0, 0, 0, 0), "UTC"),
			mustSchedule(t, Month, utc(2023, 3, 17, 0, 0, 0, 0), "UTC"), now, true, utc(2024, 5, 17, 0, 0, 0, 0), utc(2024, 6, 17, 0, 0, 0, 0)},
		// Moving the billing day from the 10th to the 15th: the new period
		// began May 15, after the stored one (May 10): usage may predate it.
		{"later billing day resets", mustSchedule(t, Month, utc(2024, 1, 10, 0, 0, 0, 0), "UTC"),
			mustSchedule(t, Month, utc(2024, 1, 15, 0, 0, 0, 0), "UTC"), now, false, utc(2024, 5, 15, 0, 0, 0, 0), utc(2024, 6, 15, 0, 0, 0, 0)},
		{"earlier billing day keeps", mustSchedule(t, Month, utc(2024, 1, 15, 0, 0, 0, 0), "UTC"),
			mustSchedule(t, Month, utc(2024, 1, 10, 0, 0, 0, 0), "UTC"), utc(2024, 5, 16, 0, 0, 0, 0), true, utc(2024, 5, 10, 0, 0, 0, 0), utc(2024, 6, 10, 0, 0, 0, 0)},
	} {
		st := stored(t, tc.from, 100, 7, tc.now)
		next, store, res, err := Check(st, true, tc.now+1, 100, tc.to, 1)
		want := int64(1)
		if tc.keepUsed {
			want = 8
		}
		if err != nil || !store || next.Used != want || res.Remaining != 100-want ||
			next.Start != tc.start || next.End != tc.end || !next.Schedule.Equal(tc.to) {
			t.Errorf("%s: used %d [%s, %s) store %v err %v, want used %d [%s, %s)", tc.name, next.Used,
				fmtNs(next.Start), fmtNs(next.End), store, err, want, fmtNs(tc.start), fmtNs(tc.end))
		}
	}
}

func TestCheckLimitChange(t *testing.T) {
	day := mustSchedule(t, Day, none, "UTC")
	now := utc(2024, 5, 17, 10, 0, 0, 0)
	st := stored(t, day, 10, 8, now)
	// Lowered below what was used: nothing left, refused until midnight,
	// even a peek; nothing is stored.
	next, store, res, err := Check(st, true, now+1, 5, day, 1)
	if err != nil || store || !res.Limited || res.Remaining != 0 || next.Limit != 5 || next.Used != 8 ||
		res.RetryAfter != utc(2024, 5, 18, 0, 0, 0, 0)-(now+1) {
		t.Errorf("lowered: %+v %+v %v %v", next, res, store, err)
	}
	if _, _, res, _ := Check(st, true, now+1, 5, day, 0); !res.Limited || res.RetryAfter != utc(2024, 5, 18, 0, 0, 0, 0)-(now+1) {
		t.Errorf("peek over a lowered limit: %+v", res)
	}
	// Raised: the same usage now leaves room.
	next, _, res, _ = Check(next, true, now+2, 20, day, 2)
	if res.Limited || res.Remaining != 10 || next.Used != 10 {
		t.Errorf("raised: %+v %+v", next, res)
	}
}

// If the clock steps back before the stored period, the period is kept
// (usage is not forgiven) and ResetAfter runs to its end.
func TestCheckClockBack(t *testing.T) {
	day := mustSchedule(t, Day, none, "UTC")
	st := stored(t, day, 3, 3, utc(2024, 5, 17, 10, 0, 0, 0))
	back := utc(2024, 5, 16, 23, 0, 0, 0)
	next, _, res, err := Check(st, true, back, 3, day, 1)
	if err != nil || !res.Limited || res.ResetAfter != 25*3600*nsPerSecond || next.Start != st.Start {
		t.Errorf("clock back: %+v %+v %v", next, res, err)
	}
	if u, _ := next.Get(back); u.Used != 3 || u.Start != st.Start {
		t.Errorf("get after clock back: %+v", u)
	}
	// RESET re-anchors to the clock.
	if u, err := next.Reset(back); err != nil || u.Used != 0 || u.Start != utc(2024, 5, 16, 0, 0, 0, 0) {
		t.Errorf("reset after clock back: %+v %v", u, err)
	}
}

func TestGetRefundReset(t *testing.T) {
	week := mustSchedule(t, Week, none, "Europe/Berlin")
	now := utc(2024, 5, 15, 12, 0, 0, 0) // Wednesday
	start, end := utc(2024, 5, 12, 22, 0, 0, 0), utc(2024, 5, 19, 22, 0, 0, 0)
	st := stored(t, week, 10, 6, now)

	if u, err := st.Get(now + 1); err != nil || u != (Usage{Used: 6, Limit: 10, Remaining: 4, Start: start, End: end}) {
		t.Errorf("get: %+v %v", u, err)
	}
	if u, err := st.Refund(now+2, 2); err != nil || u.Used != 4 || st.Used != 4 {
		t.Errorf("refund 2: %+v %v", u, err)
	}
	if u, err := st.Refund(now+3, 100); err != nil || u.Used != 0 || u.Remaining != 10 {
		t.Errorf("refund floors at 0: %+v %v", u, err)
	}
	if _, err := st.Refund(now+4, -1); !errors.Is(err, ErrNegative) {
		t.Errorf("negative refund err = %v", err)
	}
	st.Used = 9
	if u, err := st.Reset(now + 5); err != nil || u.Used != 0 || u.Start != start || u.End != end {
		t.Errorf("reset: %+v %v", u, err)
	}
	st.Used = 9
	// After the week ends GET rolls to the current week with nothing used.
	later := utc(2024, 6, 1, 12, 0, 0, 0) // Saturday
	if u, err := st.Get(later); err != nil || u.Used != 0 || u.Start != utc(2024, 5, 26, 22, 0, 0, 0) || u.End != utc(2024, 6, 2, 22, 0, 0, 0) {
		t.Errorf("get after the period: %+v %v", u, err)
	}
	if st.Start != utc(2024, 5, 26, 22, 0, 0, 0) || st.Used != 0 {
		t.Errorf("get did not roll the state: %+v", st)
	}
	// Refund after a roll applies to the new (empty) period.
	st.Used = 2
	if u, _ := st.Refund(utc(2024, 6, 10, 0, 0, 0, 0), 1); u.Used != 0 {
		t.Errorf("refund after roll: %+v", u)
	}
	for _, now := range []int64{-1, MaxInstant + 1} {
		if _, err := st.Get(now); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Get(%d) err %v", now, err)
		}
		if _, err := st.Reset(now); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Reset(%d) err %v", now, err)
		}
	}
}

func TestExpireAt(t *testing.T) {
	st := State{Start: utc(2024, 2, 1, 0, 0, 0, 0), End: utc(2024, 3, 1, 0, 0, 0, 0)}
	if got, want := st.ExpireAt(), utc(2024, 3, 30, 0, 0, 0, 0); got != want {
		t.Errorf("ExpireAt = %s, want %s", fmtNs(got), fmtNs(want))
	}
	st = State{Start: math.MaxInt64 - 10, End: math.MaxInt64 - 5}
	if st.ExpireAt() != math.MaxInt64 {
		t.Errorf("ExpireAt does not saturate: %d", st.ExpireAt())
	}
}
