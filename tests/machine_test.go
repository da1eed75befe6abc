package tests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func digest(t testing.TB, c *redis.Client) string {
	t.Helper()
	d, err := c.Do(ctx(t), "DEBUG", "DIGEST").Text()
	if err != nil || len(d) != 40 {
		t.Fatalf("DEBUG DIGEST = %q, %v", d, err)
	}
	return d
}

// DEBUG DIGEST covers every key, value, expiry and the applied instant:
// reads (of expired keys too) leave it alone, a graceful restart brings
// back the same state, and a change moves it.
func TestDigest(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	empty := digest(t, c)
	at := future + 5*int64(time.Second)
	setClock(t, c, at)
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "gcra", 5, 10, 60))
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "short", 0, 1, 1))
	ints(t, c.Do(ctx(t), "SW.CHECK", "sw", 10, 60, "EXACT"))
	ints(t, c.Do(ctx(t), "FW.CHECK", "fw", 10, 60))
	ints(t, c.Do(ctx(t), "CONC.ACQUIRE", "conc", 3, 1, "req"))
	ints(t, c.Do(ctx(t), "QUOTA.CHECK", "quota", 100, "DAY", "TZ", "Asia/Tokyo"))
	advance(t, c, 2*time.Second)
	ints(t, c.Do(ctx(t), "FW.CHECK", "fw", 10, 60))
	d1 := digest(t, c)
	if d1 == empty {
		t.Fatal("the digest did not change when keys were written")
	}
	// "short" and "conc" have expired: reading them changes nothing.
	for _, args := range [][]any{{"TTL", "short"}, {"EXISTS", "short", "conc"}, {"CONC.GET", "conc"},
		{"TYPE", "short"}, {"GET", "short"}, {"DBSIZE"}, {"KEYS", "*"}, {"SCAN", 0}} {
		if err := c.Do(ctx(t), args...).Err(); err != nil && err != redis.Nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	if n := c.Exists(ctx(t), "short", "conc").Val(); n != 0 {
		t.Fatalf("expired keys exist: %d", n)
	}
	if d := digest(t, c); d != d1 {
		t.Fatalf("reads changed the digest: %s → %s", d1, d)
	}
	s.Stop()
	s.Start()
	c = s.Client()
	if d := digest(t, c); d != d1 {
		t.Fatalf("after a graceful restart the digest is %s, was %s", d, d1)
	}
	setClock(t, c, at+2*int64(time.Second))
	ints(t, c.Do(ctx(t), "SW.CHECK", "sw", 10, 60, "EXACT"))
	if d := digest(t, c); d == d1 {
		t.Fatal("the digest did not change with the state")
	}
}

// The test clock never goes back, and says so rather than clamping; an
// advance that would overflow is an error too.
func TestDebugClockRefusesThePast(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	err := c.Do(ctx(t), "DEBUG", "CLOCK", "SET", future-1).Err()
	if err == nil || !strings.Contains(err.Error(), strconv.FormatInt(future, 10)) {
		t.Fatalf("SET into the past: %v, want an error naming the current instant %d", err, future)
	}
	if err := c.Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", "9223372036854775807").Err(); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Fatalf("overflowing ADVANCE: %v", err)
	}
	if got, _ := c.Do(ctx(t), "DEBUG", "CLOCK", "GET").Int64(); got != future {
		t.Fatalf("the clock moved to %d after refused calls", got)
	}
}

// CL.THROTTLE reads its integers as redis-cell does: an optional sign.
func TestThrottleSignedIntegers(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	plus := ints(t, c.Do(ctx(t), "CL.THROTTLE", "a", "+4", "+10", "+60", "+2"))
	plain := ints(t, c.Do(ctx(t), "CL.THROTTLE", "b", "4", "10", "60", "2"))
	if fmt.Sprint(plus) != fmt.Sprint(plain) {
		t.Fatalf("+4 +10 +60 +2 answered %v, 4 10 60 2 answered %v", plus, plain)
	}
	for _, bad := range []string{"++4", "+", "+-4", "4+"} {
		if err := c.Do(ctx(t), "CL.THROTTLE", "c", bad, "10", "60").Err(); err == nil || !strings.Contains(err.Error(), "not an integer") {
			t.Errorf("max_burst %q: %v, want the integer error", bad, err)
		}
	}
}

// CONFIG RESETSTAT zeroes statistics, never the count of changes the
// periodic snapshot uses to decide whether there is anything to save.
func TestResetStatDoesNotHideChanges(t *testing.T) {
	s := StartServer(t, "--snapshot-interval", "100ms")
	c := s.Client()
	setClock(t, c, future)
	saved := func() string { return infoField(t, c, "persistence", "sluice_snapshot_keys") }
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "a", 5, 10, 60))
	eventually(t, "the first change saved", func() bool { return saved() == "1" })
	if err := c.Do(ctx(t), "CONFIG", "RESETSTAT").Err(); err != nil {
		t.Fatal(err)
	}
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "b", 5, 10, 60))
	eventually(t, "the change after RESETSTAT saved", func() bool { return saved() == "2" })
	s.Kill()
	s.Start()
	c = s.Client()
	if n := c.Exists(ctx(t), "a", "b").Val(); n != 2 {
		t.Fatalf("after a crash %d of the 2 keys are back; the snapshot missed the change after RESETSTAT", n)
	}
}

// used_memory_keyspace counts what the records hold, an exact log's
// timestamps included (row 13 of the faults issue: it grew 80 bytes for
// 2.37 MB).
func TestKeyspaceMemoryCountsWhatRecordsHold(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	mem := func() int64 {
		n, err := strconv.ParseInt(infoField(t, c, "memory", "used_memory_keyspace"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := mem()
	const entries = 20000
	p := c.Pipeline()
	for range entries {
		p.Do(ctx(t), "SW.CHECK", "log", 100000, 3600, "EXACT")
		p.Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", 1)
	}
	if _, err := p.Exec(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if grew := mem() - before; grew < entries*12 {
		t.Fatalf("used_memory_keyspace grew %d bytes for %d logged instants (at least %d held)", grew, entries, entries*12)
	}
}
