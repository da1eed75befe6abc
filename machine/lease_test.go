package machine

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

const leaseRules = `domain: edge
descriptors:
  - key: gcra
    rate_limit: {name: gcra, unit: second, requests_per_unit: 10, sluice: {algorithm: gcra, burst: 9}}
  - key: fixed
    rate_limit: {name: fixed, unit: minute, requests_per_unit: 100}
  - key: sliding
    rate_limit: {name: sliding, unit: minute, requests_per_unit: 100, sluice: {algorithm: sliding}}
  - key: quota
    rate_limit: {name: quota, unit: day, requests_per_unit: 100, sluice: {algorithm: quota}}
  - key: closed
    rate_limit: {name: closed, unit: second, requests_per_unit: 0}
`

// leaseReply is RL.LEASE's reply as "granted ttl_ms refresh_ms".
func leaseReply(t *testing.T, got string) string {
	t.Helper()
	var g, ttl, refresh int64
	if _, err := fmt.Sscanf(got, "*3\r\n:%d\r\n:%d\r\n:%d\r\n", &g, &ttl, &refresh); err != nil {
		t.Fatalf("not a lease reply: %q", got)
	}
	return fmt.Sprint(g, " ", ttl, " ", refresh)
}

func leased(t *testing.T, m *Machine, now int64, holder string, want int, alg string) string {
	t.Helper()
	return leaseReply(t, do(m, now, "RL.LEASE", "edge", holder, "10", "WANT", fmt.Sprint(want), "DESCRIPTOR", alg, "a"))
}

func remainingOf(t *testing.T, m *Machine, now int64, alg string) string {
	t.Helper()
	return strings.Fields(five(t, do(m, now, "RL.CHECK", "edge", "COST", "0", "DESCRIPTOR", alg, "a")))[2]
}

// Every algorithm: a grant charges the bucket, a repeat while held grants
// nothing more, holders share the limit by what they ask, and a return
// gives back exactly what was not used.
func TestLeaseGrantsSharesAndReturns(t *testing.T) {
	for _, alg := range []string{"gcra", "fixed", "sliding", "quota"} {
		t.Run(alg, func(t *testing.T) {
			m := New(Options{})
			if got := do(m, t0, "RL.RULES", "LOAD", "edge.yaml", leaseRules); got != "+OK\r\n" {
				t.Fatal(got)
			}
			capacity := 100
			if alg == "gcra" {
				capacity = 10
			}
			if got := leased(t, m, t0, "h1", 4, alg); got != "4 10000 8000" {
				t.Fatalf("a first grant under capacity: %s", got)
			}
			if got := remainingOf(t, m, t0, alg); got != fmt.Sprint(capacity-4) {
				t.Fatalf("after a grant of 4, remaining %s", got)
			}
			// The same holder again while held: the grant it holds,
			// nothing charged.
			if got := leased(t, m, t0, "h1", 50, alg); got != "4 10000 8000" {
				t.Fatalf("a repeat: %s", got)
			}
			if got := remainingOf(t, m, t0, alg); got != fmt.Sprint(capacity-4) {
				t.Fatalf("a repeat charged: remaining %s", got)
			}
			// h1 asks for 50 now, h2 for 150: 200 asked of the capacity,
			// so h2's share is capacity × 150 / 200.
			want := min(capacity*150/200, capacity-4)
			if got := leased(t, m, t0, "h2", 150, alg); got != fmt.Sprint(want, " 10000 8000") {
				t.Fatalf("h2's share: %s, want %d", got, want)
			}
			// h2 used 5 of it: the rest comes back, exactly.
			got := do(m, t0, "RL.LEASE", "RETURN", "edge", "h2", "UNUSED", fmt.Sprint(want-5), "DESCRIPTOR", alg, "a")
			if wantRow := fmt.Sprintf(":%d\r\n:5\r\n:%d\r\n:0\r\n", want, want-5); !strings.HasSuffix(got, wantRow) {
				t.Fatalf("return: %q, want a row ending %q", got, wantRow)
			}
			if got := remainingOf(t, m, t0, alg); got != fmt.Sprint(capacity-4-5) {
				t.Fatalf("after the return, remaining %s, want %d", got, capacity-9)
			}
			if got := do(m, t0, "RL.LEASE", "RETURN", "edge", "h2", "UNUSED", "0", "DESCRIPTOR", alg, "a"); got != "$-1\r\n" {
				t.Fatalf("a second return: %q", got)
			}
			// More unused than granted is refused, and changes nothing.
			if got := do(m, t0, "RL.LEASE", "RETURN", "edge", "h1", "UNUSED", "5", "DESCRIPTOR", alg, "a"); !strings.HasPrefix(got, "-ERR UNUSED 5 is more than the lease granted (4)") {
				t.Fatalf("returning more than granted: %q", got)
			}
			if got := remainingOf(t, m, t0, alg); got != fmt.Sprint(capacity-9) {
				t.Fatalf("a refused return changed the counter: %s", got)
			}
		})
	}
}

// A grant never takes more than the limits admit now; an expired lease
// keeps its charge; an unlimited bucket is granted what was asked and a
// closed one nothing.
func TestLeaseBoundsAndExpiry(t *testing.T) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "edge.yaml", leaseRules)
	do(m, t0, "RL.CHECK", "edge", "COST", "97", "DESCRIPTOR", "fixed", "a")
	if got := leased(t, m, t0, "h1", 50, "fixed"); got != "3 10000 8000" {
		t.Fatalf("with 3 left: %s", got)
	}
	if got := leased(t, m, t0, "h2", 50, "fixed"); got != "0 10000 8000" {
		t.Fatalf("with nothing left: %s", got)
	}
	// A repeat later: the same grant, its ttl counting down.
	if got := leased(t, m, t0+2_000_000_000, "h1", 50, "fixed"); got != "3 8000 6400" {
		t.Fatalf("a repeat 2 s later: %s", got)
	}
	// The lease expires: its charge stays.
	later := t0 + 11_000_000_000
	if got := remainingOf(t, m, later, "fixed"); got != "0" {
		t.Fatalf("an expired lease gave its charge back: remaining %s", got)
	}
	if got := do(m, later, "RL.LEASE", "RETURN", "edge", "h1", "UNUSED", "3", "DESCRIPTOR", "fixed", "a"); got != "$-1\r\n" {
		t.Fatalf("returning an expired lease: %q", got)
	}
	if got := leased(t, m, t0, "h1", 7, "unknown"); got != "7 10000 8000" {
		t.Fatalf("a bucket no rule limits: %s", got)
	}
	if got := leased(t, m, t0, "h1", 7, "closed"); got != "0 10000 8000" {
		t.Fatalf("a bucket whose rule allows nothing: %s", got)
	}
}

// Bad input gets a clear error and charges nothing; clients cannot name a
// lease's reservation.
func TestLeaseRefusesBadInput(t *testing.T) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "edge.yaml", leaseRules)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"edge", "h", "0", "WANT", "1", "DESCRIPTOR", "fixed", "a"}, "ERR ttl-seconds"},
		{[]string{"edge", "h", "10", "WANT", "0", "DESCRIPTOR", "fixed", "a"}, "ERR WANT must be"},
		{[]string{"edge", "h", "10", "NEED", "1", "DESCRIPTOR", "fixed", "a"}, "ERR syntax error"},
		{[]string{"edge", "", "10", "WANT", "1", "DESCRIPTOR", "fixed", "a"}, "ERR a holder must be"},
		{[]string{"edge", strings.Repeat("h", 129), "10", "WANT", "1", "DESCRIPTOR", "fixed", "a"}, "ERR a holder must be"},
		{[]string{"edge", "h", "10", "WANT", "1", "DESCRIPTOR", "fixed", strings.Repeat("v", 4097)}, "ERR a lease's descriptor value is 4097 bytes, more than 4096"},
		{[]string{"edge", "h", "10", "WANT", "1", "DESCRIPTOR", strings.Repeat("k", 1025), "a"}, "ERR a lease's descriptor key is 1025 bytes, more than 1024"},
		{[]string{"RETURN", "edge", "h", "UNUSED", "0", "DESCRIPTOR", "fixed", strings.Repeat("v", 1<<20)}, "ERR a lease's descriptor value is 1048576 bytes"},
		{[]string{"edge", "h", "10", "WANT", "1", "DESCRIPTOR", "fixed", "a", "DESCRIPTOR", "sliding", "a"}, "ERR a lease is for one bucket"},
		{[]string{"edge", "h", "10", "WANT", "1", "COST", "3", "DESCRIPTOR", "fixed"}, "ERR syntax error"},
		{[]string{"RETURN", "edge", "h", "UNUSED", "-1", "DESCRIPTOR", "fixed", "a"}, "ERR UNUSED must be"},
	} {
		got := do(m, t0, append([]string{"RL.LEASE"}, c.args...)...)
		if !strings.HasPrefix(got, "-"+c.want) {
			t.Errorf("RL.LEASE %v: %q, want %q", c.args, got, c.want)
		}
	}
	if got := remainingOf(t, m, t0, "fixed"); got != "100" {
		t.Fatalf("bad input charged: %s", got)
	}
	if got := do(m, t0, "RL.RESERVE", "edge", "\x00lease:x", "10", "DESCRIPTOR", "fixed", "a"); !strings.HasPrefix(got, "-ERR a reservation id must not begin with a NUL") {
		t.Fatalf("a reserve under a lease's id: %q", got)
	}
	if got := do(m, t0, "RL.CANCEL", "edge", "\x00lease:x"); !strings.HasPrefix(got, "-ERR a reservation id must not begin with a NUL") {
		t.Fatalf("a cancel of a lease's id: %q", got)
	}
}

// The demand record keeps its own copy of a holder's name: a server reads
// each command into a buffer the next one overwrites.
func TestLeaseDemandOutlivesTheArguments(t *testing.T) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "edge.yaml", leaseRules)
	buf := make([]byte, 0, 256)
	apply := func(args ...string) string {
		buf = buf[:0]
		b := make([][]byte, len(args))
		for i, a := range args {
			start := len(buf)
			buf = append(buf, a...)
			b[i] = buf[start:len(buf):len(buf)]
		}
		var w resp.Writer
		m.ApplyArgs(t0, b, &w)
		for i := range buf {
			buf[i] = 'x' // the next command's bytes
		}
		return string(w.Buf)
	}
	apply("RL.LEASE", "edge", "gw-1", "10", "WANT", "40", "DESCRIPTOR", "fixed", "a")
	apply("RL.LEASE", "edge", "gw-1", "10", "WANT", "90", "DESCRIPTOR", "fixed", "a")
	// 150 asked of 100: gw-2's share is 40, if gw-1 is still gw-1.
	if got := leaseReply(t, apply("RL.LEASE", "edge", "gw-2", "10", "WANT", "60", "DESCRIPTOR", "fixed", "a")); got != "40 10000 8000" {
		t.Fatalf("gw-2: %s", got)
	}
}

// A lease's records sit in its counter's slot, which RL.LEASE (and its
// return) is routed by: the counter's group decides, and the records move
// with the counter.
func TestLeaseLivesWithItsCounter(t *testing.T) {
	m := New(Options{})
	atLevel(m, Level)
	do(m, t0, "RL.RULES", "LOAD", "edge.yaml", leaseRules)
	args := words("RL.LEASE", "edge", "h1", "10", "WANT", "5", "DESCRIPTOR", "fixed", "a")
	if got := leaseReply(t, do(m, t0, "RL.LEASE", "edge", "h1", "10", "WANT", "5", "DESCRIPTOR", "fixed", "a")); got != "5 10000 8000" {
		t.Fatal(got)
	}
	var counter string
	for i := range slot.Count {
		sl := m.keys.Lock(i)
		sl.Keys(m.Applied(), func(key []byte, e keyspace.Entry) bool {
			if e.Kind() == keyspace.KindFixedWindow {
				counter = string(key)
			}
			return true
		})
		sl.Unlock()
	}
	route := m.Lookup([]byte("rl.lease")).RouteKey(args)
	if string(route) != counter {
		t.Fatalf("RL.LEASE is routed by %q, its counter is %q", route, counter)
	}
	ret := words("RL.LEASE", "RETURN", "edge", "h1", "UNUSED", "5", "DESCRIPTOR", "fixed", "a")
	if got := m.Lookup([]byte("rl.lease")).RouteKey(ret); string(got) != counter {
		t.Fatalf("RL.LEASE RETURN is routed by %q, its counter is %q", got, counter)
	}
	s := slot.Of([]byte(counter))
	sl := m.keys.Lock(s)
	n := sl.Len()
	sl.Unlock()
	if n != 3 {
		t.Fatalf("the counter's slot holds %d records, want the counter, the grant and the demand", n)
	}
	// A lease is no reservation in the counts (INFO, metrics): its grant
	// has a kind of its own.
	if rc := m.Reservations(); rc.Held != 0 || rc.Reserved != 0 {
		t.Fatalf("a lease counted as a reservation: %+v", rc)
	}
	if st := m.Keys().Stats(); st.Kinds[keyspace.KindLease] != 1 {
		t.Fatalf("grants held: %d, want 1", st.Kinds[keyspace.KindLease])
	}
	// Nothing limits a bucket: routed by the domain.
	if got := m.Lookup([]byte("rl.lease")).RouteKey(words("RL.LEASE", "edge", "h1", "10", "WANT", "5", "DESCRIPTOR", "nothing", "a")); string(got) != "edge" {
		t.Fatalf("an unlimited bucket is routed by %q", got)
	}
}

// A lease moves with its counter's slot: after the slot migrated to
// another group, the holder's return there is exact and the asks still
// count toward the shares; the old group holds nothing of it.
func TestLeaseMovesWithItsCounter(t *testing.T) {
	lease := []string{"RL.LEASE", "edge", "h1", "60", "WANT", "30", "DESCRIPTOR", "fixed", "a"}
	src, dst := New(Options{}), New(Options{})
	for _, m := range []*Machine{src, dst} {
		do(m, t0, "RL.RULES", "LOAD", "edge.yaml", leaseRules)
	}
	s := slot.Of([]byte(counterKey(src, "edge", "fixed", "a")))
	spare := (s + 1) % slot.Count
	do(src, t0, "SLUICE.OWN", "1", "0-16383")
	do(dst, t0, "SLUICE.OWN", "1", strconv.Itoa(spare)+"-"+strconv.Itoa(spare))
	if got := leaseReply(t, do(src, t0, lease...)); got != "30 60000 48000" {
		t.Fatalf("the grant: %s", got)
	}
	if got := do(src, t0+1, "SLUICE.JOB", "ADD", "j1", "g2", "a", "b", strconv.Itoa(s)+"-"+strconv.Itoa(s)); got != "+OK\r\n" {
		t.Fatalf("job: %q", got)
	}
	moveOnce(t, src, dst, t0+1, "j1", 2, strconv.Itoa(s)+"-"+strconv.Itoa(s))
	// The grant moved: its return there is exact (no repeat first: a
	// repeat would ask again, and the ask below must be the one that moved).
	got := do(dst, t0+3, "RL.LEASE", "RETURN", "edge", "h1", "UNUSED", "30", "DESCRIPTOR", "fixed", "a")
	if !strings.HasSuffix(got, ":30\r\n:0\r\n:30\r\n:0\r\n") {
		t.Fatalf("the return where the lease moved: %q", got)
	}
	// h1's ask moved too, and still counts: h2's share of 90 beside h1's
	// 30 is 100 × 90 / 120 = 75 (90 if the ask had stayed behind).
	if got := leaseReply(t, do(dst, t0+3, "RL.LEASE", "edge", "h2", "60", "WANT", "90", "DESCRIPTOR", "fixed", "a")); got != "75 60000 48000" {
		t.Fatalf("h2 where the lease moved: %s", got)
	}
	if got := remainingOf(t, dst, t0+4, "fixed"); got != "25" {
		t.Fatalf("remaining %s after 30 back and a grant of 75", got)
	}
	if got := do(src, t0+4, "RL.LEASE", "RETURN", "edge", "h2", "UNUSED", "0", "DESCRIPTOR", "fixed", "a"); !strings.HasPrefix(got, "-") && got != "$-1\r\n" {
		t.Fatalf("the old group still holds a lease: %q", got)
	}
}

// A lease obeys the domain's RL.SCALE and RL.OVERRIDE as a check does:
// the limits in force are read where the domain keeps them (its own slot),
// not in the counter's.
func TestLeaseFollowsScaleAndOverride(t *testing.T) {
	m := New(Options{})
	atLevel(m, Level)
	do(m, t0, "RL.RULES", "LOAD", "edge.yaml", leaseRules)
	if got := do(m, t0, "RL.SCALE", "SET", "edge", "0.5"); !strings.HasPrefix(got, "+OK") {
		t.Fatalf("RL.SCALE: %q", got)
	}
	if got := leased(t, m, t0, "h1", 80, "fixed"); got != "50 10000 8000" {
		t.Fatalf("a lease of 80 under a scale of 0.5 of 100: %s", got)
	}
	if got := do(m, t0, "RL.OVERRIDE", "SET", "edge", "20", "minute", "DESCRIPTOR", "sliding", "a"); !strings.HasPrefix(got, "+OK") {
		t.Fatalf("RL.OVERRIDE: %q", got)
	}
	if got := leased(t, m, t0, "h1", 80, "sliding"); got != "10 10000 8000" {
		t.Fatalf("a lease of 80 under an override of 20, scaled by 0.5: %s", got)
	}
}

// A bucket's holders are bounded: 1024 may ask, the 1025th is refused
// with the reason and charges nothing, and one that holds already is
// still renewed.
func TestLeaseHoldersAreBounded(t *testing.T) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "edge.yaml", leaseRules)
	for i := range MaxLeaseHolders {
		got := do(m, t0, "RL.LEASE", "edge", "h"+strconv.Itoa(i), "10", "WANT", "1", "DESCRIPTOR", "quota", "a")
		if strings.HasPrefix(got, "-") {
			t.Fatalf("holder %d of %d: %q", i+1, MaxLeaseHolders, got)
		}
	}
	before := remainingOf(t, m, t0, "quota")
	if got := do(m, t0, "RL.LEASE", "edge", "one-more", "10", "WANT", "1", "DESCRIPTOR", "quota", "a"); !strings.Contains(got, "1024 holders") {
		t.Fatalf("holder %d: %q", MaxLeaseHolders+1, got)
	}
	if after := remainingOf(t, m, t0, "quota"); after != before {
		t.Fatalf("the refused holder charged: %s left, %s before", after, before)
	}
	if got := do(m, t0+1, "RL.LEASE", "edge", "h7", "10", "WANT", "1", "DESCRIPTOR", "quota", "a"); strings.HasPrefix(got, "-") {
		t.Fatalf("a holder renewing at the bound: %q", got)
	}
}
