package machine

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
)

const reserveRules = `domain: llm
descriptors:
  - key: fixed
    rate_limit: {name: fixed, unit: minute, requests_per_unit: 100}
  - key: sliding
    rate_limit: {name: sliding, unit: minute, requests_per_unit: 100, sluice: {algorithm: sliding}}
  - key: exact
    rate_limit: {name: exact, unit: minute, requests_per_unit: 100, sluice: {algorithm: sliding-exact}}
  - key: gcra
    rate_limit: {name: gcra, unit: minute, requests_per_unit: 60, sluice: {algorithm: gcra, burst: 99}}
  - key: quota
    rate_limit: {name: quota, unit: day, requests_per_unit: 100, sluice: {algorithm: quota}}
`

// Every algorithm: a reserve charges like RL.CHECK, a retried reserve
// charges nothing, a settle below the reservation gives the rest back and
// one above charges the difference, and the counters read as if the
// request had cost what it settled for.
func TestReserveSettleEveryAlgorithm(t *testing.T) {
	for _, alg := range []string{"fixed", "sliding", "exact", "gcra", "quota"} {
		t.Run(alg, func(t *testing.T) {
			m := New(Options{})
			if got := do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules); got != "+OK\r\n" {
				t.Fatal(got)
			}
			check := func(now int64) string {
				return five(t, do(m, now, "RL.CHECK", "llm", "COST", "0", "DESCRIPTOR", alg, "a"))
			}
			if got := five(t, do(m, t0, "RL.RESERVE", "llm", "req-1", "60", "COST", "40", "DESCRIPTOR", alg, "a")); !strings.HasPrefix(got, "0 100 60 ") {
				t.Fatalf("reserve: %s", got)
			}
			if got := five(t, do(m, t0+1, "RL.RESERVE", "llm", "req-1", "60", "COST", "40", "DESCRIPTOR", alg, "a")); !strings.HasPrefix(got, "0 100 60 ") {
				t.Fatalf("retried reserve: %s", got)
			}
			if got := check(t0 + 2); !strings.HasPrefix(got, "0 100 60 ") {
				t.Fatalf("the retry charged: %s", got)
			}
			got := do(m, t0+3, "RL.SETTLE", "llm", "req-1", "15")
			if want := "*1\r\n*5\r\n$" + strconv.Itoa(len(alg)) + "\r\n" + alg + "\r\n:40\r\n:15\r\n:25\r\n:0\r\n"; got != want {
				t.Fatalf("settle: %q, want %q", got, want)
			}
			if got := check(t0 + 4); !strings.HasPrefix(got, "0 100 85 ") {
				t.Fatalf("after settling for 15 of 40: %s", got)
			}
			if got := do(m, t0+5, "RL.SETTLE", "llm", "req-1", "15"); got != "$-1\r\n" {
				t.Fatalf("a second settle: %q", got)
			}
			// Above the reservation: charged, past the limit if it must.
			do(m, t0+6, "RL.RESERVE", "llm", "req-2", "60", "COST", "10", "DESCRIPTOR", alg, "a")
			got = do(m, t0+7, "RL.SETTLE", "llm", "req-2", "110")
			if !strings.HasSuffix(got, ":10\r\n:110\r\n:0\r\n:100\r\n") {
				t.Fatalf("settle above: %q", got)
			}
			if got := check(t0 + 8); !strings.HasPrefix(got, "1 100 0 ") && !strings.HasPrefix(got, "0 100 0 ") {
				t.Fatalf("after 125 units on a limit of 100: %s", got)
			}
			// Cancel gives everything back.
			m2 := New(Options{})
			do(m2, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
			do(m2, t0, "RL.RESERVE", "llm", "c", "60", "COST", "30", "DESCRIPTOR", alg, "a")
			if got := do(m2, t0+1, "RL.CANCEL", "llm", "c"); !strings.HasSuffix(got, ":30\r\n:0\r\n:30\r\n:0\r\n") {
				t.Fatalf("cancel: %q", got)
			}
			if got := five(t, do(m2, t0+2, "RL.CHECK", "llm", "COST", "0", "DESCRIPTOR", alg, "a")); !strings.HasPrefix(got, "0 100 100 ") {
				t.Fatalf("after cancel: %s", got)
			}
		})
	}
}

// A reservation not settled within its ttl keeps its charge and is gone:
// at the instant the log applies, not the wall clock.
func TestReservationExpiresAtTheLogsInstant(t *testing.T) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
	do(m, t0, "RL.RESERVE", "llm", "r", "10", "COST", "30", "DESCRIPTOR", "quota", "a")
	do(m, t0, "RL.RESERVE", "llm", "r2", "10", "COST", "30", "DESCRIPTOR", "quota", "a")
	if c := m.Reservations(); c.Reserved != 2 || c.Held != 2 {
		t.Fatalf("counts: %+v", c)
	}
	if got := do(m, t0+10e9-1, "RL.SETTLE", "llm", "r", "0"); got == "$-1\r\n" {
		t.Fatal("gone before its ttl")
	}
	if got := do(m, t0+10e9, "RL.SETTLE", "llm", "r2", "0"); got != "$-1\r\n" {
		t.Fatalf("after its ttl: %q", got)
	}
	if got := five(t, do(m, t0+10e9, "RL.CHECK", "llm", "COST", "0", "DESCRIPTOR", "quota", "a")); !strings.HasPrefix(got, "0 100 70 ") { // r given back, r2 kept
		t.Fatalf("an expired reservation keeps its charge: %s", got)
	}
	m.Sweep(&keyspace.SweepCursor{}, 1<<20, 0)
	if c := m.Reservations(); c.Reserved != 2 || c.Settled != 1 || c.Held != 0 || c.Expired != 1 {
		t.Fatalf("counts: %+v", c)
	}
}

// Bad input is a clear error and charges nothing.
func TestReserveBadInput(t *testing.T) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
	long := strings.Repeat("x", 257)
	for _, tc := range [][]string{
		{"RL.RESERVE", "llm", "r", "0", "DESCRIPTOR", "fixed", "a"},
		{"RL.RESERVE", "llm", "r", "-1", "DESCRIPTOR", "fixed", "a"},
		{"RL.RESERVE", "llm", "r", "86401", "DESCRIPTOR", "fixed", "a"},
		{"RL.RESERVE", "llm", "", "10", "DESCRIPTOR", "fixed", "a"},
		{"RL.RESERVE", "llm", long, "10", "DESCRIPTOR", "fixed", "a"},
		{"RL.RESERVE", "llm", "r", "10", "COST", "-1", "DESCRIPTOR", "fixed", "a"},
		{"RL.RESERVE", "llm", "r", "10", "COST", "99999999999999999999", "DESCRIPTOR", "fixed", "a"},
		{"RL.RESERVE", "llm", "r", "10", "DESCRIPTOR", "fixed"},
		{"RL.SETTLE", "llm", "r", "-1"},
		{"RL.SETTLE", "llm", "r", "4294967296"},
		{"RL.SETTLE", "llm", long, "1"},
		{"RL.CANCEL", "llm", ""},
	} {
		got := do(m, t0, tc...)
		if !strings.HasPrefix(got, "-ERR ") || strings.Contains(got, "internal") {
			t.Errorf("%q: %q", tc, got)
		}
		if bad := m.Check(words(tc...)); bad == "" {
			t.Errorf("%q passes the check before the log", tc)
		}
	}
	if got := five(t, do(m, t0, "RL.CHECK", "llm", "COST", "0", "DESCRIPTOR", "fixed", "a")); !strings.HasPrefix(got, "0 100 100 ") {
		t.Fatalf("bad input charged: %s", got)
	}
	// An unknown domain limits nothing; its reservation holds nothing,
	// and its settle answers as an unknown id's.
	if got := five(t, do(m, t0, "RL.RESERVE", "nope", "r", "10", "DESCRIPTOR", "k", "v")); !strings.HasPrefix(got, "0 -1 -1 -1 0") {
		t.Fatalf("unknown domain: %s", got)
	}
	if held := m.Reservations().Held; held != 0 {
		t.Fatalf("a reservation no limit applies to is held (%d held)", held)
	}
	if got, unknown := do(m, t0, "RL.SETTLE", "nope", "r", "5"), do(m, t0, "RL.SETTLE", "nope", "never", "5"); got != unknown {
		t.Fatalf("settle of an unlimited reservation: %q, of an unknown id %q", got, unknown)
	}
}

// A held reservation goes through a snapshot (AppendState, DecodeState,
// StoreState, as persist and a Raft snapshot move it) and settles the
// same on the restored machine; every cut or flipped byte of its encoding
// is refused or read whole, never a panic.
func TestReservationSurvivesASnapshot(t *testing.T) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
	do(m, t0, "RL.RESERVE", "llm", "held", "60", "COST", "40", "DESCRIPTOR", "gcra", "a", "DESCRIPTOR", "exact", "a", "DESCRIPTOR", "quota", "a")
	var enc []byte
	restored := snapshotCopy(t, m, func(kind keyspace.Kind, b []byte) {
		if kind == keyspace.KindReservation {
			enc = b
		}
	})
	if d1, _ := m.Digest(); d1 != must(restored.Digest()) {
		t.Fatal("digests differ after the restore")
	}
	a, b := do(m, t0+5, "RL.SETTLE", "llm", "held", "10"), do(restored, t0+5, "RL.SETTLE", "llm", "held", "10")
	if a != b || !strings.HasPrefix(a, "*3\r\n") {
		t.Fatalf("settle %q, restored %q", a, b)
	}
	if enc == nil {
		t.Fatal("no reservation record")
	}
	for i := range enc {
		for _, cut := range [][]byte{enc[:i], append(append([]byte(nil), enc[:i]...), append([]byte{enc[i] ^ 0xff}, enc[i+1:]...)...)} {
			if r, err := decodeReservation(cut); err == nil && r == nil {
				t.Fatalf("%x: nil without an error", cut)
			}
		}
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

// Envoy's is_negative_hits, as RL.SHOULDRATELIMIT's hits "-N": the units
// go back off the latest charge, whatever the decision, the status is OK
// and reports the state after it; it never refuses a request.
func TestShouldRateLimitNegativeHits(t *testing.T) {
	for _, alg := range []string{"fixed", "sliding", "exact", "gcra", "quota"} {
		m := New(Options{})
		do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
		remaining := func() string { return five(t, do(m, t0+2, "RL.CHECK", "llm", "COST", "0", "DESCRIPTOR", alg, "a")) }
		do(m, t0, "RL.CHECK", "llm", "COST", "100", "DESCRIPTOR", alg, "a")
		got := do(m, t0+1, "RL.SHOULDRATELIMIT", "llm", "1", "1", "-30", "-", "-", alg, "a")
		if !strings.HasPrefix(got, "*2\r\n:1\r\n*9\r\n:1\r\n") || !strings.Contains(got, "\r\n:30\r\n") {
			t.Errorf("%s: negative hits: %q", alg, got)
		}
		if r := remaining(); !strings.HasPrefix(r, "0 100 30 ") {
			t.Errorf("%s: after giving 30 back: %s", alg, r)
		}
		// Never below nothing counted.
		do(m, t0+1, "RL.SHOULDRATELIMIT", "llm", "1", "1", "-500", "-", "-", alg, "a")
		if r := remaining(); !strings.HasPrefix(r, "0 100 100 ") {
			t.Errorf("%s: after giving back more than was counted: %s", alg, r)
		}
	}
	m := New(Options{})
	if got := do(m, t0, "RL.SHOULDRATELIMIT", "llm", "1", "1", "-0", "-", "-", "k", "v"); got != "*2\r\n:1\r\n*9\r\n:1\r\n:-1\r\n$0\r\n\r\n$0\r\n\r\n:0\r\n:-1\r\n:0\r\n:-1\r\n:0\r\n" {
		t.Errorf("-0 is 0 hits: %q", got)
	}
	for _, bad := range []string{"-4294967296", "--1", "- 1"} {
		if got := do(m, t0, "RL.SHOULDRATELIMIT", "llm", "1", "1", bad, "-", "-", "k", "v"); !strings.HasPrefix(got, "-ERR a descriptor's hits") {
			t.Errorf("hits %q: %q", bad, got)
		}
	}
}

// The refund rules through the machine: random histories of one
// reservation among other callers' checks, with time jumps across windows
// and periods, then a settle keeping some units. From the settle on, every
// peek sees the key never laxer than a machine that replayed the same
// admissions with the kept units instead (no more remaining, at any later
// instant), and exactly as it for the window kinds and quota (whose refunds
// are exact) and for GCRA when no one else charged after the reserve.
func TestRefundAgainstTheReplayThroughTheMachine(t *testing.T) {
	rules := `domain: p
descriptors:
  - key: fixed
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: sliding
    rate_limit: {unit: minute, requests_per_unit: 20, sluice: {algorithm: sliding}}
  - key: exact
    rate_limit: {unit: minute, requests_per_unit: 20, sluice: {algorithm: sliding-exact}}
  - key: gcra
    rate_limit: {unit: minute, requests_per_unit: 20, sluice: {algorithm: gcra, burst: 19}}
  - key: quota
    rate_limit: {unit: hour, requests_per_unit: 20, sluice: {algorithm: quota}}
`
	const minute = int64(60e9)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, alg := range []string{"fixed", "sliding", "exact", "gcra", "quota"} {
		for trial := range 300 {
			real, replay := New(Options{}), New(Options{})
			do(real, t0, "RL.RULES", "LOAD", "p.yaml", rules)
			do(replay, t0, "RL.RULES", "LOAD", "p.yaml", rules)
			now := t0 + rng.Int64N(minute)
			type event struct {
				at, cost int64
				ours     bool
			}
			var events []event
			others := func() bool {
				touched := false
				for range rng.IntN(4) {
					now += rng.Int64N(minute / 2)
					c := 1 + rng.Int64N(6)
					if strings.HasPrefix(five(t, do(real, now, "RL.CHECK", "p", "COST", strconv.FormatInt(c, 10), "DESCRIPTOR", alg, "k")), "0 ") {
						events = append(events, event{now, c, false})
						touched = true
					}
				}
				return touched
			}
			others()
			now += rng.Int64N(minute / 2)
			n := 1 + rng.Int64N(10)
			if !strings.HasPrefix(five(t, do(real, now, "RL.RESERVE", "p", "r", "3600", "COST", strconv.FormatInt(n, 10), "DESCRIPTOR", alg, "k")), "0 ") {
				continue
			}
			events = append(events, event{now, n, true})
			touched := others()
			now += rng.Int64N(minute)
			kept := rng.Int64N(n + 1)
			do(real, now, "RL.SETTLE", "p", "r", strconv.FormatInt(kept, 10))
			for _, e := range events {
				c := e.cost
				if e.ours {
					c = kept
				}
				if c > 0 && !strings.HasPrefix(five(t, do(replay, e.at, "RL.CHECK", "p", "COST", strconv.FormatInt(c, 10), "DESCRIPTOR", alg, "k")), "0 ") {
					t.Fatalf("%s trial %d: the replay refused an admission that happened", alg, trial)
				}
			}
			exact := alg != "gcra" || !touched
			for _, later := range []int64{0, 1, minute / 3, minute, 2 * minute} {
				at := now + later
				got := five(t, do(real, at, "RL.CHECK", "p", "COST", "0", "DESCRIPTOR", alg, "k"))
				want := five(t, do(replay, at, "RL.CHECK", "p", "COST", "0", "DESCRIPTOR", alg, "k"))
				g, w := field(got, 2), field(want, 2)
				if g > w || (exact && g != w) {
					t.Fatalf("%s trial %d, %d ns after the settle: remaining %d, the replay's %d (exact %v; events %+v, n %d kept %d)",
						alg, trial, later, g, w, exact, events, n, kept)
				}
			}
		}
	}
}

// field is the i-th integer of a five-integer reply as five prints it.
func field(five string, i int) int64 {
	n, _ := strconv.ParseInt(strings.Fields(five)[i], 10, 64)
	return n
}

// A shadow-mode limit that would have refused charged nothing: the
// reservation holds none of it, and a cancel gives nothing back there.
func TestReserveHoldsOnlyWhatWasCharged(t *testing.T) {
	rules := `domain: s
descriptors:
  - key: real
    rate_limit: {name: real, unit: minute, requests_per_unit: 100}
  - key: shadow
    shadow_mode: true
    rate_limit: {name: shadow, unit: minute, requests_per_unit: 5}
`
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "s.yaml", rules)
	do(m, t0, "RL.CHECK", "s", "COST", "4", "DESCRIPTOR", "shadow", "x")
	if got := five(t, do(m, t0, "RL.RESERVE", "s", "r", "60", "COST", "3", "DESCRIPTOR", "real", "x", "DESCRIPTOR", "shadow", "x")); !strings.HasPrefix(got, "0 ") {
		t.Fatalf("reserve: %s", got)
	}
	got := do(m, t0+1, "RL.CANCEL", "s", "r")
	if !strings.Contains(got, "$4\r\nreal\r\n:3\r\n:0\r\n:3\r\n:0\r\n") || !strings.Contains(got, "$6\r\nshadow\r\n:0\r\n:0\r\n:0\r\n:0\r\n") {
		t.Fatalf("cancel: %q", got)
	}
	if got := five(t, do(m, t0+2, "RL.CHECK", "s", "COST", "0", "DESCRIPTOR", "shadow", "x")); !strings.HasPrefix(got, "0 5 1 ") {
		t.Fatalf("the shadow counter after the cancel: %s (it kept the 4 charged before)", got)
	}
}

// decodeReservation decodes a reservation record as a snapshot does.
func decodeReservation(b []byte) (*ReservationState, error) {
	v, err := DecodeState(keyspace.KindReservation, b, nil)
	r, _ := v.(*ReservationState)
	return r, err
}
