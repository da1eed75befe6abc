package tests

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sec is a Unix second as the debug clock's nanoseconds.
func sec(s int64) int64 { return s * 1e9 }

// Billing anniversaries through the command, at fixed instants (the
// expected bounds are worked out independently, by a calendar, in the
// comments).
func TestQuotaAnniversaries(t *testing.T) {
	s := StartServer(t)
	c := s.Client()

	// Subscribed 2100-01-31 00:00 UTC, monthly: 2100 is not a leap year,
	// so the February period ends on the 28th (clamped), March's on the
	// 31st again.
	const jan31, feb28, mar31 = 4105036800, 4107456000, 4110134400
	setClock(t, c, sec(4106376000)) // 2100-02-15 12:00 UTC
	want(t, "mid-February", ints(t, c.Do(ctx(t), "QUOTA.CHECK", "acct", 100, "MONTH", "ANCHOR", jan31, "COST", 5)),
		0, 100, 95, -1, feb28-4106376000)
	want(t, "QUOTA.GET", ints(t, c.Do(ctx(t), "QUOTA.GET", "acct")), 5, jan31, feb28, 100, 95)
	setClock(t, c, sec(feb28)-1) // the last nanosecond of the period
	want(t, "last ns", ints(t, c.Do(ctx(t), "QUOTA.CHECK", "acct", 100, "MONTH", "ANCHOR", jan31)), 0, 100, 94, -1, 0)
	setClock(t, c, sec(feb28))
	want(t, "renewed on the 28th", ints(t, c.Do(ctx(t), "QUOTA.CHECK", "acct", 100, "MONTH", "ANCHOR", jan31)),
		0, 100, 99, -1, mar31-feb28)
	want(t, "March period", ints(t, c.Do(ctx(t), "QUOTA.GET", "acct")), 1, feb28, mar31, 100, 99)

	// Yearly from 2096-02-29 08:00 UTC: in 2100 the anniversary is Feb 28
	// 08:00, and the period runs to 2101-02-28 08:00.
	setClock(t, c, sec(4115491200)) // 2100-06-01 00:00 UTC
	ints(t, c.Do(ctx(t), "QUOTA.CHECK", "leap", 10, "YEAR", "ANCHOR", 3981340800))
	want(t, "leap-day anchor", ints(t, c.Do(ctx(t), "QUOTA.GET", "leap")), 1, 4107484800, 4139020800, 10, 9)

	// A week from Wednesday 09:30 Berlin time, anchored in winter (CET)
	// and used in summer (CEST): the wall-clock 09:30 is kept.
	setClock(t, c, sec(4118896800)) // Saturday 2100-07-10 12:00 CEST
	ints(t, c.Do(ctx(t), "QUOTA.CHECK", "wk", 10, "WEEK", "ANCHOR", 4102907400, "TZ", "Europe/Berlin"))
	want(t, "weekly in Berlin", ints(t, c.Do(ctx(t), "QUOTA.GET", "wk")), 1, 4118628600, 4119233400, 10, 9)

	// Calendar days in New York: 2100-03-14 is the spring-forward day,
	// 23 hours long. (Checked after the summer keys: the clock only moves
	// forward, so this uses a second server.)
	s2 := StartServer(t)
	c2 := s2.Client()
	setClock(t, c2, sec(4108723200)) // 2100-03-14 12:00 EDT
	want(t, "DST day", ints(t, c2.Do(ctx(t), "QUOTA.CHECK", "ny", 10, "day", "TZ", "America/New_York")),
		0, 10, 9, -1, 12*3600)
	want(t, "23-hour day", ints(t, c2.Do(ctx(t), "QUOTA.GET", "ny")), 1, 4108683600, 4108766400, 10, 9)
}

// Exhausting, refunding, resetting and rolling over one quota.
func TestQuotaCounting(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future+10*int64(time.Hour)) // 2100-01-01 10:00 UTC
	day := int64(4102444800 + 86400)           // next midnight
	left := day*1e9 - (future + 10*int64(time.Hour))
	reset := left / 1e9
	for i := int64(1); i <= 3; i++ {
		want(t, "within the limit", ints(t, c.Do(ctx(t), "QUOTA.CHECK", "q", 3, "DAY")), 0, 3, 3-i, -1, reset)
	}
	want(t, "over: retry at the period's end", ints(t, c.Do(ctx(t), "QUOTA.CHECK", "q", 3, "DAY")), 1, 3, 0, reset, reset)
	want(t, "more than the limit: never", ints(t, c.Do(ctx(t), "QUOTA.CHECK", "q", 3, "DAY", "COST", 4)), 1, 3, 0, -1, reset)
	want(t, "refused requests are not counted", ints(t, c.Do(ctx(t), "QUOTA.GET", "q")), 3, 4102444800, day, 3, 0)
	want(t, "refund", ints(t, c.Do(ctx(t), "QUOTA.REFUND", "q", 2)), 1, 4102444800, day, 3, 2)
	want(t, "refund below 0", ints(t, c.Do(ctx(t), "QUOTA.REFUND", "q", 10)), 0, 4102444800, day, 3, 3)
	want(t, "a peek", ints(t, c.Do(ctx(t), "QUOTA.CHECK", "q", 3, "DAY", "COST", 0)), 0, 3, 3, -1, reset)
	ints(t, c.Do(ctx(t), "QUOTA.CHECK", "q", 3, "DAY", "COST", 2))
	want(t, "reset", ints(t, c.Do(ctx(t), "QUOTA.RESET", "q")), 0, 4102444800, day, 3, 3)
	advance(t, c, time.Duration(left))
	want(t, "GET rolls to the new day without writing", ints(t, c.Do(ctx(t), "QUOTA.GET", "q")), 0, day, day+86400, 3, 3)
	want(t, "the new day", ints(t, c.Do(ctx(t), "QUOTA.CHECK", "q", 3, "DAY")), 0, 3, 2, -1, 86400)

	if typ := c.Type(ctx(t), "q").Val(); typ != "quota" {
		t.Fatalf("TYPE = %q", typ)
	}
	// The key expires a full idle period after its period ends.
	if pttl := c.PTTL(ctx(t), "q").Val(); pttl != 2*24*time.Hour {
		t.Fatalf("PTTL = %v, want 48h", pttl)
	}
	for _, cmd := range [][]any{{"QUOTA.GET", "none"}, {"QUOTA.REFUND", "none", 1}, {"QUOTA.RESET", "none"}} {
		if err := c.Do(ctx(t), cmd...).Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("%v on a missing key: %v, want nil", cmd, err)
		}
	}
	if c.Exists(ctx(t), "none").Val() != 0 {
		t.Fatal("REFUND or RESET created a key")
	}
	if out := redisCLI(t, s.Addr, "QUOTA.GET", "none"); strings.TrimSpace(out) != "" {
		t.Fatalf("redis-cli QUOTA.GET of a missing key printed %q", out)
	}
}

func TestQuotaErrors(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	c.Do(ctx(t), "CL.THROTTLE", "gcra", 1, 1, 1)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"QUOTA.CHECK", "q", 10}, "ERR wrong number of arguments for 'quota.check' command"},
		{[]any{"QUOTA.CHECK", "q", 10, "FORTNIGHT"}, "ERR unknown period, want HOUR, DAY, WEEK, MONTH or YEAR"},
		{[]any{"QUOTA.CHECK", "q", 10, "DAY", "TZ", "Mars/Olympus"}, `ERR unknown time zone: "Mars/Olympus"`},
		{[]any{"QUOTA.CHECK", "q", 10, "DAY", "TZ", "Local"}, `ERR unknown time zone: "Local"`},
		{[]any{"QUOTA.CHECK", "q", -1, "DAY"}, "ERR limit must not be negative"},
		{[]any{"QUOTA.CHECK", "q", "1.5", "DAY"}, "ERR value is not an integer or out of range"},
		{[]any{"QUOTA.CHECK", "q", 10, "DAY", "COST", -2}, "ERR COST must not be negative"},
		{[]any{"QUOTA.CHECK", "q", 10, "DAY", "COST", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"QUOTA.CHECK", "q", 10, "DAY", "ANCHOR", -5}, "ERR ANCHOR must not be negative"},
		{[]any{"QUOTA.CHECK", "q", 10, "DAY", "ANCHOR", "99999999999999999999"}, "ERR value is not an integer or out of range"},
		{[]any{"QUOTA.CHECK", "q", 10, "DAY", "ANCHOR", "9300000000"}, "ERR ANCHOR is out of range (at most 9000000000)"},
		{[]any{"QUOTA.CHECK", "q", 10, "DAY", "COST"}, "ERR syntax error"},
		{[]any{"QUOTA.CHECK", "q", 10, "DAY", "COST", 1, "COST", 2}, "ERR syntax error"},
		{[]any{"QUOTA.CHECK", "q", 10, "DAY", "BURST", 1}, "ERR syntax error"},
		{[]any{"QUOTA.CHECK", "gcra", 10, "DAY"}, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{[]any{"QUOTA.GET", "gcra"}, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{[]any{"QUOTA.REFUND", "q", -1}, "ERR units must not be negative"},
		{[]any{"QUOTA.REFUND", "q", "lots"}, "ERR value is not an integer or out of range"},
	} {
		err := c.Do(ctx(t), tc.args...).Err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if c.Exists(ctx(t), "q").Val() != 0 {
		t.Fatal("a refused QUOTA.CHECK created the key")
	}
	// Past 2255 period bounds might not fit in int64 nanoseconds.
	setClock(t, c, 9_100_000_000_000_000_000)
	if err := c.Do(ctx(t), "QUOTA.CHECK", "q", 10, "DAY").Err(); err == nil || err.Error() != "ERR instant out of supported range" {
		t.Fatalf("QUOTA.CHECK in 2258: %v", err)
	}
}
