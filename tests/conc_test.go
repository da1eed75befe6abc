package tests

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// concStep is one command at the current debug-clock instant and the reply
// the CONC.* contract in the README gives for it.
type concStep struct {
	advance time.Duration // moved before the command
	args    []any
	want    any // []int64 for arrays, int64 for integers
}

func runConcSteps(t *testing.T, c *redis.Client, steps []concStep) {
	t.Helper()
	for i, st := range steps {
		if st.advance > 0 {
			advance(t, c, st.advance)
		}
		cmd := c.Do(ctx(t), st.args...)
		var got any
		switch st.want.(type) {
		case []int64:
			got = ints(t, cmd)
		default:
			v, err := cmd.Result()
			if err != nil {
				t.Fatalf("step %d %v: %v", i, st.args, err)
			}
			got = v
		}
		if fmt.Sprint(got) != fmt.Sprint(st.want) {
			t.Fatalf("step %d %v = %v, want %v", i, st.args, got, st.want)
		}
	}
}

// Fill a key to its limit, get refused with the time until the earliest
// lease ends, release one, take its place.
func TestConcFillRejectRelease(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	runConcSteps(t, c, []concStep{
		{0, []any{"CONC.ACQUIRE", "api", 3, 10, "a"}, []int64{0, 3, 2, -1, 10}},
		{0, []any{"CONC.ACQUIRE", "api", 3, 10, "b"}, []int64{0, 3, 1, -1, 10}},
		{2 * time.Second, []any{"CONC.ACQUIRE", "api", 3, 10, "c"}, []int64{0, 3, 0, -1, 10}},
		// a and b end at +10 s, c at +12 s: the first slot frees in 8 s, the
		// key is empty in 10 s.
		{0, []any{"CONC.ACQUIRE", "api", 3, 10, "d"}, []int64{1, 3, 0, 8, 10}},
		{0, []any{"CONC.GET", "api"}, []int64{3, 8, 10}},
		{0, []any{"CONC.RELEASE", "api", "b"}, int64(1)},
		{0, []any{"CONC.RELEASE", "api", "b"}, int64(0)},
		{0, []any{"CONC.RELEASE", "api", "nobody"}, int64(0)},
		{0, []any{"CONC.GET", "api"}, []int64{2, 8, 10}},
		{time.Second, []any{"CONC.ACQUIRE", "api", 3, 10, "d"}, []int64{0, 3, 0, -1, 10}},
		// Now a ends in 7 s, c in 9 s, d in 10 s.
		{0, []any{"CONC.GET", "api"}, []int64{3, 7, 10}},
		{0, []any{"CONC.ACQUIRE", "api", 3, 10, "e"}, []int64{1, 3, 0, 7, 10}},
	})
	if typ := c.Type(ctx(t), "api").Val(); typ != "leases" {
		t.Fatalf("TYPE = %q, want leases", typ)
	}
	// The key lives until its last lease ends.
	if pttl := c.PTTL(ctx(t), "api").Val(); pttl != 10*time.Second {
		t.Fatalf("PTTL = %v, want 10s", pttl)
	}
}

// A lease ends exactly at acquire time + lease: one nanosecond before, it
// still holds its slot; at that instant it counts for nothing, and the key
// goes with its last lease.
func TestConcExpiryAtLeaseEnd(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	runConcSteps(t, c, []concStep{
		{0, []any{"CONC.ACQUIRE", "one", 1, 5, "a"}, []int64{0, 1, 0, -1, 5}},
		// 1 ns left: rounds to 0 s, "retry within the second".
		{5*time.Second - time.Nanosecond, []any{"CONC.ACQUIRE", "one", 1, 5, "b"}, []int64{1, 1, 0, 0, 0}},
		{0, []any{"CONC.GET", "one"}, []int64{1, 0, 0}},
		{time.Nanosecond, []any{"CONC.GET", "one"}, []int64{0, -1, -1}},
		{0, []any{"CONC.RELEASE", "one", "a"}, int64(0)},
		{0, []any{"CONC.RENEW", "one", "a", 5}, int64(0)},
		{0, []any{"EXISTS", "one"}, int64(0)},
		{0, []any{"CONC.ACQUIRE", "one", 1, 5, "b"}, []int64{0, 1, 0, -1, 5}},
		// Releasing the last live lease removes the key at once.
		{0, []any{"CONC.RELEASE", "one", "b"}, int64(1)},
		{0, []any{"EXISTS", "one"}, int64(0)},
	})
	if n := c.DBSize(ctx(t)).Val(); n != 0 {
		t.Fatalf("DBSIZE = %d after every lease ended", n)
	}
}

// Acquiring again with an id that holds a lease refreshes it and takes no
// new slot, so a client may retry an acquire whose reply it lost.
func TestConcIdempotentAcquire(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	runConcSteps(t, c, []concStep{
		{0, []any{"CONC.ACQUIRE", "idem", 2, 10, "a"}, []int64{0, 2, 1, -1, 10}},
		{3 * time.Second, []any{"CONC.ACQUIRE", "idem", 2, 10, "a"}, []int64{0, 2, 1, -1, 10}},
		{0, []any{"CONC.GET", "idem"}, []int64{1, 10, 10}},
		{0, []any{"CONC.ACQUIRE", "idem", 2, 10, "b"}, []int64{0, 2, 0, -1, 10}},
		// Full, yet the holder of a lease is let through again.
		{0, []any{"CONC.ACQUIRE", "idem", 2, 10, "a"}, []int64{0, 2, 0, -1, 10}},
		{0, []any{"CONC.ACQUIRE", "idem", 2, 10, "c"}, []int64{1, 2, 0, 10, 10}},
		// The refresh moved a past its first end (+10 s from the start).
		{8 * time.Second, []any{"CONC.GET", "idem"}, []int64{2, 2, 2}},
	})
}

func TestConcRenew(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	runConcSteps(t, c, []concStep{
		{0, []any{"CONC.RENEW", "ren", "a", 10}, int64(0)}, // missing key
		{0, []any{"EXISTS", "ren"}, int64(0)},
		{0, []any{"CONC.ACQUIRE", "ren", 2, 10, "a"}, []int64{0, 2, 1, -1, 10}},
		{0, []any{"CONC.RENEW", "ren", "nobody", 10}, int64(0)},
		{4 * time.Second, []any{"CONC.RENEW", "ren", "a", 20}, int64(1)},
		{0, []any{"CONC.GET", "ren"}, []int64{1, 20, 20}},
		{0, []any{"PTTL", "ren"}, int64(20000)},
		// Past the original end, the renewed lease still holds its slot.
		{11 * time.Second, []any{"CONC.ACQUIRE", "ren", 1, 10, "b"}, []int64{1, 1, 0, 9, 9}},
		// Renew may also shorten.
		{0, []any{"CONC.RENEW", "ren", "a", 1}, int64(1)},
		{0, []any{"CONC.GET", "ren"}, []int64{1, 1, 1}},
		{time.Second, []any{"CONC.RENEW", "ren", "a", 10}, int64(0)},
		{0, []any{"EXISTS", "ren"}, int64(0)},
	})
}

func TestConcErrors(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	long := strings.Repeat("x", 257)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"CONC.ACQUIRE", "k", 1, 10}, "ERR wrong number of arguments for 'conc.acquire' command"},
		{[]any{"CONC.ACQUIRE", "k", 1, 10, "a", "b"}, "ERR wrong number of arguments for 'conc.acquire' command"},
		{[]any{"CONC.RELEASE", "k"}, "ERR wrong number of arguments for 'conc.release' command"},
		{[]any{"CONC.RENEW", "k", "a"}, "ERR wrong number of arguments for 'conc.renew' command"},
		{[]any{"CONC.GET"}, "ERR wrong number of arguments for 'conc.get' command"},
		{[]any{"CONC.ACQUIRE", "k", "x", 10, "a"}, "ERR value is not an integer or out of range"},
		{[]any{"CONC.ACQUIRE", "k", 1, "1.5", "a"}, "ERR value is not an integer or out of range"},
		{[]any{"CONC.ACQUIRE", "k", "99999999999999999999", 10, "a"}, "ERR value is not an integer or out of range"},
		{[]any{"CONC.ACQUIRE", "k", 0, 10, "a"}, "ERR limit must be positive"},
		{[]any{"CONC.ACQUIRE", "k", -3, 10, "a"}, "ERR limit must be positive"},
		{[]any{"CONC.ACQUIRE", "k", 10001, 10, "a"}, "ERR limit is above 10000"},
		{[]any{"CONC.ACQUIRE", "k", 1, 0, "a"}, "ERR lease must be positive"},
		{[]any{"CONC.ACQUIRE", "k", 1, -9223372036854775808, "a"}, "ERR lease must be positive"},
		{[]any{"CONC.ACQUIRE", "k", 1, 9223372037, "a"}, "ERR value is out of range: seconds overflow int64 nanoseconds"},
		// Fits in nanoseconds, but not once added to the clock.
		{[]any{"CONC.ACQUIRE", "k", 1, 9000000000, "a"}, "ERR lease expiry overflows"},
		{[]any{"CONC.ACQUIRE", "k", 1, 10, long}, "ERR request id is longer than 256 bytes"},
		{[]any{"CONC.RELEASE", "k", long}, "ERR request id is longer than 256 bytes"},
		{[]any{"CONC.RENEW", "k", long, 10}, "ERR request id is longer than 256 bytes"},
		{[]any{"CONC.RENEW", "k", "a", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"CONC.RENEW", "k", "a", 0}, "ERR lease must be positive"},
		{[]any{"CONC.RENEW", "k", "a", -1}, "ERR lease must be positive"},
	} {
		err := c.Do(ctx(t), tc.args...).Err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	// No refused acquire created a key.
	if n := c.DBSize(ctx(t)).Val(); n != 0 {
		t.Fatalf("DBSIZE = %d after only bad commands", n)
	}
	// The longest id allowed is accepted by all three commands.
	longest := strings.Repeat("y", 256)
	runConcSteps(t, c, []concStep{
		{0, []any{"CONC.ACQUIRE", "k", 10000, 10, longest}, []int64{0, 10000, 9999, -1, 10}},
		{0, []any{"CONC.RENEW", "k", longest, 10}, int64(1)},
		{0, []any{"CONC.RELEASE", "k", longest}, int64(1)},
	})

	// A key of another limiter is WRONGTYPE both ways, and is left alone.
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "gcra", 5, 1, 60))
	ints(t, c.Do(ctx(t), "CONC.ACQUIRE", "lease", 5, 60, "a"))
	wrong := "WRONGTYPE Operation against a key holding the wrong kind of value"
	for _, args := range [][]any{
		{"CONC.ACQUIRE", "gcra", 5, 60, "a"},
		{"CONC.RELEASE", "gcra", "a"},
		{"CONC.RENEW", "gcra", "a", 60},
		{"CONC.GET", "gcra"},
		{"CL.THROTTLE", "lease", 5, 1, 60},
	} {
		if err := c.Do(ctx(t), args...).Err(); err == nil || err.Error() != wrong {
			t.Errorf("%v: error %v, want WRONGTYPE", args, err)
		}
	}
	if typ := c.Type(ctx(t), "gcra").Val(); typ != "gcra" {
		t.Fatalf("TYPE gcra = %q after CONC commands on it", typ)
	}
	runConcSteps(t, c, []concStep{{0, []any{"CONC.GET", "lease"}, []int64{1, 60, 60}}})
}

func TestConcRedisCLI(t *testing.T) {
	s := StartServer(t)
	if out := redisCLI(t, s.Addr, "CONC.ACQUIRE", "cli", "2", "30", "req-1"); out != "0\n2\n1\n-1\n30\n" {
		t.Fatalf("redis-cli CONC.ACQUIRE printed %q", out)
	}
	if out := redisCLI(t, s.Addr, "CONC.GET", "cli"); out != "1\n30\n30\n" {
		t.Fatalf("redis-cli CONC.GET printed %q", out)
	}
	if out := redisCLI(t, s.Addr, "CONC.RELEASE", "cli", "req-1"); out != "1\n" {
		t.Fatalf("redis-cli CONC.RELEASE printed %q", out)
	}
	if out := redisCLI(t, s.Addr, "COMMAND", "DOCS", "conc.acquire"); !strings.Contains(out, "request-id") {
		t.Fatalf("COMMAND DOCS conc.acquire printed %q", out)
	}
}

// 200 goroutines share a limit of 20 on the real clock: each acquires
// (retrying while the key is full), holds a few milliseconds and releases.
// An in-test count of holders, raised after the acquire reply and lowered
// before the release is sent, must never pass 20, and every goroutine must
// get through.
func TestConcConcurrentHolders(t *testing.T) {
	s := StartServer(t)
	const goroutines, limit, attempts = 200, 20, 4000
	c := s.Client(func(o *redis.Options) { o.PoolSize = goroutines })
	bg := ctx(t)
	var holding, most, through atomic.Int64
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			id := fmt.Sprintf("req-%d", g)
			for range attempts {
				reply, err := c.Do(bg, "CONC.ACQUIRE", "shared", limit, 30, id).Int64Slice()
				if err != nil {
					errs <- fmt.Errorf("%s: acquire: %v", id, err)
					return
				}
				if reply[0] == 1 {
					if reply[2] != 0 || reply[3] < 0 || reply[3] > 30 {
						errs <- fmt.Errorf("%s: refusal %v", id, reply)
						return
					}
					// Waiting on other goroutines to release, not on a limit.
					time.Sleep(time.Duration(200+rng.IntN(800)) * time.Microsecond)
					continue
				}
				n := holding.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Duration(rng.IntN(3001)) * time.Microsecond)
				holding.Add(-1)
				released, err := c.Do(bg, "CONC.RELEASE", "shared", id).Int64()
				if err != nil || released != 1 {
					errs <- fmt.Errorf("%s: release = %d, %v; want 1", id, released, err)
					return
				}
				through.Add(1)
				return
			}
			errs <- fmt.Errorf("%s: not through after %d attempts", id, attempts)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m := most.Load(); m > limit {
		t.Fatalf("%d goroutines held a lease at once, limit %d", m, limit)
	}
	if n := through.Load(); n != goroutines {
		t.Fatalf("%d of %d goroutines got through", n, goroutines)
	}
	t.Logf("at most %d holders at once", most.Load())
	runConcSteps(t, c, []concStep{{0, []any{"CONC.GET", "shared"}, []int64{0, -1, -1}}})
}

// concAcquireRaw sends one CONC.ACQUIRE on a fresh connection, reads the
// reply and closes the connection without releasing, as a crashed client
// would.
func concAcquireRaw(t *testing.T, addr, key string, limit, lease int, id string) string {
	t.Helper()
	conn := dialRaw(t, addr)
	defer conn.Close()
	args := []string{"CONC.ACQUIRE", key, fmt.Sprint(limit), fmt.Sprint(lease), id}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	var reply strings.Builder
	for range 6 { // *5 and five integers
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the reply: %v (so far %q)", err, reply.String())
		}
		reply.WriteString(line)
	}
	return reply.String()
}

// Clients that acquire and vanish hold their slots only until their leases
// end; then the sweep removes the key and new clients get through.
func TestConcCrashedClients(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	for i := range 5 {
		got := concAcquireRaw(t, s.Addr, "crash", 5, 60, fmt.Sprintf("dead-%d", i))
		want := fmt.Sprintf("*5\r\n:0\r\n:5\r\n:%d\r\n:-1\r\n:60\r\n", 4-i)
		if got != want {
			t.Fatalf("raw acquire %d = %q, want %q", i, got, want)
		}
	}
	runConcSteps(t, c, []concStep{
		{0, []any{"CONC.ACQUIRE", "crash", 5, 60, "alive"}, []int64{1, 5, 0, 60, 60}},
		{60*time.Second - time.Nanosecond, []any{"CONC.ACQUIRE", "crash", 5, 60, "alive"}, []int64{1, 5, 0, 0, 0}},
	})
	advance(t, c, time.Nanosecond)
	// Nobody touches the key: the sweep must reclaim it.
	eventually(t, "the sweep reclaims a key whose leases all ended", func() bool { return c.DBSize(ctx(t)).Val() == 0 })
	for i := range 5 {
		got := ints(t, c.Do(ctx(t), "CONC.ACQUIRE", "crash", 5, 60, fmt.Sprintf("alive-%d", i)))
		if want := []int64{0, 5, int64(4 - i), -1, 60}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("acquire %d after the crashed leases ended = %v, want %v", i, got, want)
		}
	}
}
