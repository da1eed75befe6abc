package tests

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// want compares a limiter reply with the expected five integers.
func want(t *testing.T, what string, got []int64, w ...int64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(w) {
		t.Fatalf("%s: %v, want %v", what, got, w)
	}
}

func exists(t *testing.T, c *redis.Client, key string) bool {
	t.Helper()
	n, err := c.Exists(ctx(t), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// The fixed window's known flaw, and that the sliding log does not share it:
// 100 per 60 s, 100 requests one second before a boundary and 100 at it.
func TestWindowBoundaryBurst(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future+59*int64(time.Second)) // future is a multiple of 60 s
	admitted := map[string]int{}
	burst := func(cmd ...any) {
		t.Helper()
		pipe := c.Pipeline()
		var cmds []*redis.Cmd
		for range 101 {
			cmds = append(cmds, pipe.Do(ctx(t), cmd...))
		}
		if _, err := pipe.Exec(ctx(t)); err != nil {
			t.Fatal(err)
		}
		for _, r := range cmds {
			if ints(t, r)[0] == 0 {
				admitted[fmt.Sprint(cmd[0], cmd[1])]++
			}
		}
	}
	fw := []any{"FW.CHECK", "fw", 100, 60}
	sw := []any{"SW.CHECK", "sw", 100, 60, "EXACT"}
	burst(fw...)
	burst(sw...)
	want(t, "FW.CHECK after 100 in the window's last second", ints(t, c.Do(ctx(t), fw...)), 1, 100, 0, 1, 1)
	advance(t, c, time.Second) // the boundary
	burst(fw...)
	burst(sw...)
	if got := admitted["FW.CHECKfw"]; got != 200 {
		t.Errorf("FW.CHECK admitted %d in the two seconds around a boundary, want 200 (its documented flaw)", got)
	}
	if got := admitted["SW.CHECKsw"]; got != 100 {
		t.Errorf("SW.CHECK EXACT admitted %d in two seconds, want 100", got)
	}
	// The new fixed window ends 60 s after the boundary.
	want(t, "FW.CHECK in the new window", ints(t, c.Do(ctx(t), fw...)), 1, 100, 0, 60, 60)
}

// A seeded random trace at about twice the limit, every request on the
// debug clock: the exact log never admits more than 100 in any 60 s, and
// the counter stays inside its documented bound (< limit·(1 + d/window)
// within any d), which caps short bursts near the limit.
func TestSlidingWindowTraces(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	rng := rand.New(rand.NewPCG(4, 2))
	const n = 1500
	gaps := make([]int64, n)
	for i := range gaps {
		gaps[i] = rng.Int64N(int64(600 * time.Millisecond)) // mean 0.3 s: 2× 100 per 60 s
	}
	for _, mode := range []string{"counter", "exact"} {
		args := []any{"SW.CHECK", mode, 100, 60}
		if mode == "exact" {
			args = append(args, "EXACT")
		}
		pipe := c.Pipeline()
		var cmds []*redis.Cmd
		for _, g := range gaps {
			pipe.Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", g)
			cmds = append(cmds, pipe.Do(ctx(t), args...))
		}
		if _, err := pipe.Exec(ctx(t)); err != nil {
			t.Fatal(err)
		}
		var admitted []int64
		now := int64(0)
		for i, r := range cmds {
			now += gaps[i]
			if ints(t, r)[0] == 0 {
				admitted = append(admitted, now)
			}
		}
		const w = int64(60 * time.Second)
		for _, d := range []int64{2 * int64(time.Second), w} {
			most := int64(mostWithin(admitted, d))
			t.Logf("%s: most admitted within %v: %d of %d requests", mode, time.Duration(d), most, n)
			switch {
			case mode == "exact" && most > 100:
				t.Errorf("EXACT: %d admitted within %v, limit 100", most, time.Duration(d))
			case mode == "exact" && d == w && most != 100:
				t.Errorf("EXACT: at most %d admitted within 60 s; the trace is 2× over, want the limit 100", most)
			case mode == "counter" && most*w >= 100*(w+d):
				t.Errorf("counter: %d admitted within %v, the documented bound is fewer than 100·(1 + %v/60s)",
					most, time.Duration(d), time.Duration(d))
			}
		}
	}
}

// mostWithin is the most instants of ascending ts in any (t−d, t].
func mostWithin(ts []int64, d int64) int {
	most, lo := 0, 0
	for hi, t := range ts {
		for ts[lo] <= t-d {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

// The counter's estimate weighs the previous sub-window by how much of it
// still overlaps the sliding window, and its worst case lets 199 units of a
// 100 per 60 s limit through within 60 s (README, window/doc.go).
func TestSlidingCounterBehaviour(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	sec := int64(time.Second)
	setClock(t, c, future) // a multiple of 10 s
	want(t, "10 at the start of a sub-window", ints(t, c.Do(ctx(t), "SW.CHECK", "w", 10, 10, "COST", 10)), 0, 10, 0, -1, 20)
	// Next sub-window, y s in: 10·(10−y)/10 + 1 ≤ 10 from y = 1, 11 s from now.
	want(t, "one more", ints(t, c.Do(ctx(t), "SW.CHECK", "w", 10, 10)), 1, 10, 0, 11, 20)
	setClock(t, c, future+13*sec) // 3 s into the next: 10·7/10 = 7 still counted
	want(t, "peek 3 s into the next sub-window", ints(t, c.Do(ctx(t), "SW.CHECK", "w", 10, 10, "COST", 0)), 0, 10, 3, -1, 7)
	want(t, "COST 4", ints(t, c.Do(ctx(t), "SW.CHECK", "w", 10, 10, "COST", 4)), 1, 10, 3, 1, 7)
	want(t, "COST 3", ints(t, c.Do(ctx(t), "SW.CHECK", "w", 10, 10, "COST", 3)), 0, 10, 0, -1, 17)
	// 10·(10−x)/10 + 3 + 1 ≤ 10 from x = 4 s: retry_after 1 s, exact to the ns.
	got := ints(t, c.Do(ctx(t), "SW.CHECK", "w", 10, 10))
	want(t, "one more", got, 1, 10, 0, 1, 17)
	advance(t, c, time.Duration(got[3]*sec-1))
	if r := ints(t, c.Do(ctx(t), "SW.CHECK", "w", 10, 10)); r[0] != 1 {
		t.Fatalf("1 ns before retry_after: %v, want refused", r)
	}
	advance(t, c, 1)
	want(t, "at retry_after", ints(t, c.Do(ctx(t), "SW.CHECK", "w", 10, 10)), 0, 10, 0, -1, 16)
	if typ := c.Type(ctx(t), "w").Val(); typ != "sliding-counter" {
		t.Errorf("TYPE = %q, want sliding-counter", typ)
	}

	// Worst case: the whole limit in the last ns of one sub-window, then 99
	// more 2 ns before the next ends, where the estimate is 100·2ns/60s.
	setClock(t, c, future+120*sec-1)
	want(t, "100 in the last ns", ints(t, c.Do(ctx(t), "SW.CHECK", "worst", 100, 60, "COST", 100)), 0, 100, 0, -1, 60)
	setClock(t, c, future+180*sec-2)
	if r := ints(t, c.Do(ctx(t), "SW.CHECK", "worst", 100, 60, "COST", 100)); r[0] != 1 {
		t.Fatalf("COST 100 a window later: %v, want refused", r)
	}
	if r := ints(t, c.Do(ctx(t), "SW.CHECK", "worst", 100, 60, "COST", 99)); r[0] != 0 {
		t.Fatalf("COST 99 at 60 s − 1 ns after the first 100: %v, want admitted (the documented 199 overshoot)", r)
	}
}

// retry_after is honoured by every mode: one ns before it the request is
// still refused, at it it passes.
func TestWindowRetryAfter(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	sec := int64(time.Second)
	setClock(t, c, future)
	for k, tc := range []struct {
		name      string
		args      []any
		gap       time.Duration // between the ten admissions
		retry     int64
		remaining int64 // when the retry passes
	}{
		{"EXACT", []any{"SW.CHECK", "log", 10, 10, "EXACT"}, time.Second, 1, 0}, // the first unit leaves 10 s after it came
		{"FW", []any{"FW.CHECK", "fixed", 10, 10}, 0, 10, 9},                    // the window ends
	} {
		for i := range 10 {
			r := ints(t, c.Do(ctx(t), tc.args...))
			if r[0] != 0 || r[2] != int64(9-i) {
				t.Fatalf("%s admission %d: %v", tc.name, i, r)
			}
			if i < 9 && tc.gap > 0 {
				advance(t, c, tc.gap)
			}
		}
		r := ints(t, c.Do(ctx(t), tc.args...))
		if r[0] != 1 || r[3] != tc.retry {
			t.Fatalf("%s: over the limit %v, want refused with retry_after %d", tc.name, r, tc.retry)
		}
		advance(t, c, time.Duration(r[3]*sec-1))
		if r := ints(t, c.Do(ctx(t), tc.args...)); r[0] != 1 {
			t.Fatalf("%s 1 ns before retry_after: %v, want refused", tc.name, r)
		}
		advance(t, c, 1)
		if r := ints(t, c.Do(ctx(t), tc.args...)); r[0] != 0 || r[2] != tc.remaining {
			t.Fatalf("%s at retry_after: %v, want admitted with %d remaining", tc.name, r, tc.remaining)
		}
		setClock(t, c, future+int64(k+1)*100*sec) // a fresh aligned instant for the next case
	}
	// A cost above the limit can never pass.
	want(t, "COST above the limit", ints(t, c.Do(ctx(t), "SW.CHECK", "big", 10, 10, "COST", 11)), 1, 10, 10, -1, 0)
	if exists(t, c, "big") {
		t.Fatal("a refused request created its key")
	}
}

// COST 0 answers without creating a key, in every mode; admitted keys
// expire exactly at reset_after, as PTTL says.
func TestWindowPeekAndExpiry(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	sec := int64(time.Second)
	for i, tc := range []struct {
		key, typ string
		args     []any
		reset    int64 // after one admission 3 s into a 10 s window
	}{
		{"counter", "sliding-counter", []any{"SW.CHECK", "counter", 5, 10}, 17}, // the next sub-window still counts it
		{"log", "sliding-log", []any{"SW.CHECK", "log", 5, 10, "EXACT"}, 10},
		{"fixed", "fixed-window", []any{"FW.CHECK", "fixed", 5, 10}, 7},
	} {
		base := future + int64(i)*1000*sec // a fresh aligned instant per case; the clock never goes back
		setClock(t, c, base+3*sec)
		peek := append(append([]any{}, tc.args...), "COST", 0)
		want(t, tc.key+" peek", ints(t, c.Do(ctx(t), peek...)), 0, 5, 5, -1, 0)
		if exists(t, c, tc.key) {
			t.Fatalf("%s: a peek created the key", tc.key)
		}
		want(t, tc.key+" admit", ints(t, c.Do(ctx(t), tc.args...)), 0, 5, 4, -1, tc.reset)
		if typ := c.Type(ctx(t), tc.key).Val(); typ != tc.typ {
			t.Errorf("TYPE %s = %q, want %q", tc.key, typ, tc.typ)
		}
		if pttl := c.PTTL(ctx(t), tc.key).Val(); pttl != time.Duration(tc.reset*sec) {
			t.Errorf("PTTL %s = %v, want %ds", tc.key, pttl, tc.reset)
		}
		want(t, tc.key+" peek after", ints(t, c.Do(ctx(t), peek...)), 0, 5, 4, -1, tc.reset)
		advance(t, c, time.Duration(tc.reset*sec-1))
		if !exists(t, c, tc.key) {
			t.Fatalf("%s gone 1 ns before reset_after", tc.key)
		}
		advance(t, c, 1)
		if exists(t, c, tc.key) {
			t.Fatalf("%s still there at reset_after", tc.key)
		}
	}
}

// Keys of one limiter kind refuse every other kind's command, both ways.
func TestWindowWrongType(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "cl", 5, 1, 60))
	ints(t, c.Do(ctx(t), "SW.CHECK", "sw", 5, 60))
	ints(t, c.Do(ctx(t), "SW.CHECK", "swx", 5, 60, "EXACT"))
	ints(t, c.Do(ctx(t), "FW.CHECK", "fw", 5, 60))
	for _, args := range [][]any{
		{"SW.CHECK", "cl", 5, 60},
		{"SW.CHECK", "cl", 5, 60, "EXACT"},
		{"FW.CHECK", "cl", 5, 60},
		{"CL.THROTTLE", "sw", 5, 1, 60},
		{"CL.THROTTLE", "swx", 5, 1, 60},
		{"CL.THROTTLE", "fw", 5, 1, 60},
		{"SW.CHECK", "sw", 5, 60, "EXACT"},
		{"SW.CHECK", "swx", 5, 60},
		{"FW.CHECK", "sw", 5, 60},
		{"SW.CHECK", "fw", 5, 60, "COST", 0},
		{"GET", "sw"},
		{"GET", "swx"},
		{"GET", "fw"},
	} {
		err := c.Do(ctx(t), args...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE ") {
			t.Errorf("%v: %v, want WRONGTYPE", args, err)
		}
	}
}

func TestWindowBadInput(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	const notInt = "ERR value is not an integer or out of range"
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"SW.CHECK", "k", 10}, "ERR wrong number of arguments for 'sw.check' command"},
		{[]any{"FW.CHECK", "k", 10}, "ERR wrong number of arguments for 'fw.check' command"},
		{[]any{"SW.CHECK", "k", "ten", 60}, notInt},
		{[]any{"FW.CHECK", "k", 10, "1m"}, notInt},
		{[]any{"SW.CHECK", "k", 10, 60, "COST", "1.0"}, notInt},
		{[]any{"FW.CHECK", "k", "9223372036854775808", 60}, notInt},
		{[]any{"SW.CHECK", "k", 0, 60}, "ERR limit must be positive"},
		{[]any{"SW.CHECK", "k", -1, 60, "EXACT"}, "ERR limit must be positive"},
		{[]any{"FW.CHECK", "k", 0, 60}, "ERR limit must be positive"},
		{[]any{"SW.CHECK", "k", 10, 0}, "ERR window must be positive"},
		{[]any{"FW.CHECK", "k", 10, -5}, "ERR window must be positive"},
		{[]any{"FW.CHECK", "k", 10, 1_000_000_001}, "ERR window must be at most 1000000000 seconds"},
		{[]any{"SW.CHECK", "k", 10, 60, "COST", -1}, "ERR cost must not be negative"},
		{[]any{"FW.CHECK", "k", 10, 60, "COST", -2}, "ERR cost must not be negative"},
		{[]any{"SW.CHECK", "k", 100_001, 60, "EXACT"}, "ERR limit must be at most 100000 for an exact window"},
		{[]any{"SW.CHECK", "k", 10, 60, "COST"}, "ERR syntax error: COST needs a value"},
		{[]any{"SW.CHECK", "k", 10, 60, "COST", 1, "COST", 1}, "ERR syntax error: COST given more than once"},
		{[]any{"SW.CHECK", "k", 10, 60, "EXACT", "EXACT"}, "ERR syntax error: EXACT given more than once"},
		{[]any{"SW.CHECK", "k", 10, 60, "SLOW"}, "ERR syntax error: unknown option 'SLOW' (options are COST <n> and EXACT)"},
		{[]any{"FW.CHECK", "k", 10, 60, "EXACT"}, "ERR syntax error: unknown option 'EXACT' (options are COST <n>)"},
	} {
		err := c.Do(ctx(t), tc.args...).Err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if n := c.DBSize(ctx(t)).Val(); n != 0 {
		t.Errorf("bad input created %d keys", n)
	}
	// The bounds themselves are accepted.
	ints(t, c.Do(ctx(t), "SW.CHECK", "k", 100_000, 1_000_000_000, "EXACT"))
	ints(t, c.Do(ctx(t), "SW.CHECK", "k2", "9223372036854775807", 1, "COST", "9223372036854775807"))
}

// A go-redis pipeline of mixed limiter commands on one frozen instant gets
// one reply per command, in order, and refusals are counted in INFO.
func TestWindowPipeline(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	pipe := c.Pipeline()
	var sw, fw, cl []*redis.Cmd
	for range 60 {
		sw = append(sw, pipe.Do(ctx(t), "SW.CHECK", "p:sw", 50, 60))
		fw = append(fw, pipe.Do(ctx(t), "FW.CHECK", "p:fw", 50, 60))
		cl = append(cl, pipe.Do(ctx(t), "CL.THROTTLE", "p:cl", 49, 50, 60))
	}
	if _, err := pipe.Exec(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		for name, cmds := range map[string][]*redis.Cmd{"SW.CHECK": sw, "FW.CHECK": fw, "CL.THROTTLE": cl} {
			r := ints(t, cmds[i])
			wantLimited := int64(0)
			if i >= 50 {
				wantLimited = 1
			}
			if r[0] != wantLimited || r[1] != 50 || r[2] != max(0, int64(49-i)) {
				t.Fatalf("%s #%d in the pipeline: %v", name, i, r)
			}
		}
	}
	info := c.Info(ctx(t), "stats").Val()
	if !strings.Contains(info, "limited_requests:30\r\n") {
		t.Errorf("INFO stats does not count the 30 refusals:\n%s", info)
	}
}
