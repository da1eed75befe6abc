package machine

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// A reservation is held where its counters are — a part per counter's
// slot, the head in the domain's — so it moves with them. After every
// slot it touches moved to another group, the settle there is exact (the
// counters read as on a machine that never moved them). With one
// counter's slot moved, the old group refuses the settle, typed
// ErrHeldElsewhere, changing nothing; settling the moved part where it is
// (RL.PART SETTLE … PARTS) and the rest with the head (… HEAD) is the
// same settle, rows in the reserve's order.
func TestReservationMovesWithItsSlots(t *testing.T) {
	reserve := []string{"RL.RESERVE", "llm", "r", "60", "COST", "5", "DESCRIPTOR", "fixed", "a", "DESCRIPTOR", "gcra", "b"}
	checks := [][]string{{"RL.CHECK", "llm", "COST", "0", "DESCRIPTOR", "fixed", "a"}, {"RL.CHECK", "llm", "COST", "0", "DESCRIPTOR", "gcra", "b"}}
	ref := New(Options{})
	do(ref, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
	do(ref, t0, reserve...)
	wantRows := do(ref, t0+2, "RL.SETTLE", "llm", "r", "2")
	if !strings.HasPrefix(wantRows, "*2\r\n*5\r\n$5\r\nfixed\r\n:5\r\n:2\r\n:3\r\n:0\r\n*5\r\n$4\r\ngcra") {
		t.Fatalf("the reference settle: %q", wantRows)
	}
	fs := slot.Of([]byte(counterKey(ref, "llm", "fixed", "a")))
	gs := slot.Of([]byte(counterKey(ref, "llm", "gcra", "b")))
	ds := slot.Of([]byte("llm"))
	if fs == gs || fs == ds || gs == ds {
		t.Fatalf("the test wants three slots: %d %d %d", fs, gs, ds)
	}
	spare := 0
	for slices.Contains([]int{fs, gs, ds}, spare) {
		spare++
	}
	start := func() (src, dst *Machine) {
		src, dst = New(Options{}), New(Options{})
		for _, m := range []*Machine{src, dst} {
			do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
		}
		do(src, t0, "SLUICE.OWN", "1", "0-16383")
		do(dst, t0, "SLUICE.OWN", "1", strconv.Itoa(spare)+"-"+strconv.Itoa(spare))
		if got := do(src, t0, reserve...); !strings.HasPrefix(got, "*7\r\n:0\r\n") {
			t.Fatalf("RL.RESERVE: %q", got)
		}
		return src, dst
	}
	move := func(src, dst *Machine, job string, slots ...int) {
		args := []string{"SLUICE.JOB", "ADD", job, "g2", "a", "b"}
		for _, s := range slots {
			args = append(args, strconv.Itoa(s)+"-"+strconv.Itoa(s))
		}
		if got := do(src, t0+1, args...); got != "+OK\r\n" {
			t.Fatalf("job: %q", got)
		}
		for i, s := range slots {
			moveOnce(t, src, dst, t0+1, job, uint64(2+i), strconv.Itoa(s)+"-"+strconv.Itoa(s))
		}
	}

	// Everything moves: the head, both parts, both counters.
	src, dst := start()
	move(src, dst, "j1", fs, gs, ds)
	if got := do(dst, t0+2, "RL.SETTLE", "llm", "r", "2"); got != wantRows {
		t.Fatalf("RL.SETTLE where everything moved: %q, want %q", got, wantRows)
	}
	for _, c := range checks {
		if a, b := do(dst, t0+3, c...), do(ref, t0+3, c...); a != b {
			t.Fatalf("%v after the settle: %q, never moved %q", c, a, b)
		}
	}
	if held := src.Reservations().Held + dst.Reservations().Held; held != 0 {
		t.Fatalf("%d reservations still held", held)
	}

	// Only the gcra counter's slot moves.
	src, dst = start()
	move(src, dst, "j2", gs)
	before := do(src, t0+2, "DEBUG", "DIGEST")
	var w resp.Writer
	out := src.ApplyArgs(t0+2, [][]byte{[]byte("RL.SETTLE"), []byte("llm"), []byte("r"), []byte("2")}, &w)
	if !errors.Is(out.Refusal, ErrHeldElsewhere) || !strings.HasPrefix(string(w.Buf), "-TRYAGAIN") {
		t.Fatalf("RL.SETTLE with a part moved: %q %v", w.Buf, out.Refusal)
	}
	if after := do(src, t0+2, "DEBUG", "DIGEST"); after != before {
		t.Fatal("a refused settle changed the state")
	}
	if got := do(src, t0+2, "RL.PART", "SETTLE", "llm", "r", "2", "PARTS", strconv.Itoa(gs)); !strings.HasPrefix(got, "-TRYAGAIN") {
		t.Fatalf("a part settled where it no longer is: %q", got)
	}
	moved := do(dst, t0+2, "RL.PART", "SETTLE", "llm", "r", "2", "PARTS", strconv.Itoa(gs))
	rest := do(src, t0+2, "RL.PART", "SETTLE", "llm", "r", "2", "HEAD", strconv.Itoa(fs))
	if joined := "*2\r\n" + strings.TrimPrefix(rest, "*1\r\n") + strings.TrimPrefix(moved, "*1\r\n"); joined != wantRows {
		t.Fatalf("the two settles: %q and %q, want the rows of %q", rest, moved, wantRows)
	}
	if a, b := do(src, t0+3, checks[0]...), do(ref, t0+3, checks[0]...); a != b {
		t.Fatalf("the fixed counter: %q, never moved %q", a, b)
	}
	if a, b := do(dst, t0+3, checks[1]...), do(ref, t0+3, checks[1]...); a != b {
		t.Fatalf("the gcra counter: %q, never moved %q", a, b)
	}
	for _, m := range []*Machine{src, dst} {
		if got := do(m, t0+4, "RL.SETTLE", "llm", "r", "2"); got != "$-1\r\n" {
			t.Fatalf("a settled reservation settled again: %q", got)
		}
	}
}

// A head kept by RL.PART HOLD answers a retried reserve: a second HOLD
// keeps the first's reply; it lists its parts' slots, ascending, and the
// encoding keeps them and each limit's place; a head whose slots are out
// of order does not decode.
func TestHeadHoldAndEncoding(t *testing.T) {
	m := New(Options{})
	hold := func(now int64, remaining string) string {
		return do(m, now, "RL.PART", "HOLD", "llm", "x", "60", "77", "100", remaining, "-1", "0", "60", "fixed", "9", "3", "3")
	}
	if got := hold(t0, "90"); got != "*7\r\n:0\r\n:100\r\n:90\r\n:-1\r\n:0\r\n$5\r\nfixed\r\n:60\r\n" {
		t.Fatalf("HOLD: %q", got)
	}
	if got := hold(t0+1, "80"); !strings.Contains(got, ":90\r\n") {
		t.Fatalf("a second HOLD: %q, want the first's reply", got)
	}
	if got := do(m, t0+1, "RL.PART", "HOLD", "llm", "x", "60", "78", "100", "1", "-1", "0", "60", "fixed", "3"); !strings.Contains(got, "held with other arguments") {
		t.Fatalf("a HOLD of other arguments: %q", got)
	}
	if reply, sum, ok := m.HeldReserve("llm", []byte("x")); !ok || sum != 77 || reply.Remaining != 90 {
		t.Fatalf("HeldReserve: %+v %d %v", reply, sum, ok)
	}
	if slots, ok := m.HeldSlots("llm", []byte("x")); !ok || !slices.Equal(slots, []int{3, 9}) {
		t.Fatalf("HeldSlots: %v %v", slots, ok)
	}
	if m.Reservations().Reserved != 1 || m.Reservations().Held != 1 {
		t.Fatalf("counts %+v", m.Reservations())
	}
	r := &ReservationState{Reply: CheckResult{Limit: 5}, Slots: []int{2, 7}, Args: 1 << 60,
		Limits: []HeldLimit{{Charge: limiters.Charge{Key: []byte("k"), Kind: keyspace.KindFixedWindow, Units: 3, Step: 1, Limit: 5}, Name: "n", Order: 4}}}
	back, err := decodeReservation(r.AppendBinary(nil))
	if err != nil || !slices.Equal(back.Slots, r.Slots) || back.Limits[0].Order != 4 || back.Reply.Limit != 5 || back.Args != r.Args {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	r.Slots = []int{7, 2}
	if _, err := decodeReservation(r.AppendBinary(nil)); err == nil {
		t.Fatal("a head with slots out of order decoded")
	}
	// A record written before reservations were split by slot (flag 0,
	// no orders, no slots) decodes with the limits in their order.
	old := []byte{0}
	for range 5 {
		old = append(old, 0)
	}
	old = append(old, 0, 1, 1, 'k', byte(keyspace.KindFixedWindow), 1, 'n', 6, 0, 2, 10)
	if back, err := decodeReservation(old); err != nil || len(back.Limits) != 1 || back.Limits[0].Units != 3 || back.Slots != nil {
		t.Fatalf("an old record: %+v %v", back, err)
	}
}

// The same reservation id again while it is held: with the same arguments
// it answers the same and charges nothing; with others it is refused
// (ERR … held with other arguments), charging nothing either.
func TestReserveIDReusedWithOtherArguments(t *testing.T) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
	first := do(m, t0, "RL.RESERVE", "llm", "r", "60", "COST", "5", "DESCRIPTOR", "fixed", "a")
	check := func() string { return do(m, t0+3, "RL.CHECK", "llm", "COST", "0", "DESCRIPTOR", "fixed", "a") }
	before := check()
	if got := do(m, t0+1, "RL.RESERVE", "llm", "r", "60", "COST", "5", "DESCRIPTOR", "fixed", "a"); got != first {
		t.Fatalf("the same reserve again: %q, first %q", got, first)
	}
	for _, other := range [][]string{
		{"RL.RESERVE", "llm", "r", "60", "COST", "6", "DESCRIPTOR", "fixed", "a"},
		{"RL.RESERVE", "llm", "r", "30", "COST", "5", "DESCRIPTOR", "fixed", "a"},
		{"RL.RESERVE", "llm", "r", "60", "COST", "5", "DESCRIPTOR", "fixed", "b"},
	} {
		if got := do(m, t0+2, other...); got != "-ERR reservation r is held with other arguments\r\n" {
			t.Fatalf("%v: %q", other, got)
		}
	}
	if after := check(); after != before {
		t.Fatalf("the refused reserves charged: %q, was %q", after, before)
	}
}

// A settle beyond the reserve must charge: when a counter's key now holds
// another kind, the settle is refused and changes nothing (the
// reservation stays held); a cancel still ends it, giving back what it
// can.
func TestSettleBeyondAnUnchargeableCounterIsRefused(t *testing.T) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
	do(m, t0, "RL.RESERVE", "llm", "r", "60", "COST", "5", "DESCRIPTOR", "fixed", "a", "DESCRIPTOR", "sliding", "b")
	key := counterKey(m, "llm", "fixed", "a")
	do(m, t0+1, "DEL", key)
	do(m, t0+1, "CL.THROTTLE", key, "5", "5", "60") // another kind at the counter's key
	before := do(m, t0+2, "DEBUG", "DIGEST")
	if got := do(m, t0+2, "RL.SETTLE", "llm", "r", "9"); !strings.HasPrefix(got, "-ERR the reservation cannot be charged beyond it: limit fixed: WRONGTYPE") {
		t.Fatalf("a settle beyond an unchargeable counter: %q", got)
	}
	if after := do(m, t0+2, "DEBUG", "DIGEST"); after != before {
		t.Fatal("a refused settle changed the state")
	}
	if got := do(m, t0+3, "RL.CANCEL", "llm", "r"); !strings.HasPrefix(got, "*2\r\n*5\r\n$5\r\nfixed\r\n:5\r\n:0\r\n:0\r\n:0\r\n*5\r\n$7\r\nsliding\r\n:5\r\n:0\r\n:5\r\n:0\r\n") {
		t.Fatalf("the cancel: %q", got)
	}
}
