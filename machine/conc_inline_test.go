package machine

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/conc"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
)

// concReference answers CONC commands from one *conc.Leases per key, the
// way the machine kept every key before leases moved into records.
type concReference map[string]*conc.Leases

func (r concReference) apply(now int64, args []string) string {
	var w resp.Writer
	key := args[1]
	l := r[key]
	if l != nil && l.Empty(now) {
		delete(r, key)
		l = nil
	}
	switch strings.ToLower(args[0]) {
	case "conc.acquire":
		limit, _ := strconv.ParseInt(args[2], 10, 64)
		sec, _ := strconv.ParseInt(args[3], 10, 64)
		if l == nil {
			l = new(conc.Leases)
		}
		res, err := l.Acquire(now, limit, sec*1e9, []byte(args[4]))
		if err != nil {
			return "error"
		}
		if !l.Empty(now) {
			r[key] = l
		}
		w.Limiter(res.Reply())
	case "conc.release":
		released := false
		if l != nil {
			released = l.Release(now, []byte(args[2]))
		}
		w.Int(room.ReplyFlag(released))
	case "conc.renew":
		sec, _ := strconv.ParseInt(args[3], 10, 64)
		renewed := false
		if l != nil {
			renewed, _ = l.Renew(now, []byte(args[2]), sec*1e9)
		}
		w.Int(room.ReplyFlag(renewed))
	case "conc.get":
		var live int
		var next, last int64
		if l != nil {
			live, next, last = l.View(now)
		}
		if live == 0 {
			next, last = -1, -1
		} else {
			next, last = limiter.Seconds(next), limiter.Seconds(last)
		}
		w.Array(3)
		w.Int(int64(live))
		w.Int(next)
		w.Int(last)
	}
	return string(w.Buf)
}

// CONC commands on random traces answer what a key kept as one object
// answers, while keys cross between living in their record (a few
// leases) and being an object (more than a record holds), long ids and
// short; the machine's snapshot encoding of every key is the reference's.
func TestConcRecordsAgainstObjects(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	m := New(Options{})
	ref := concReference{}
	now := t0
	inline, objects := 0, 0
	for step := range 20000 {
		now += rng.Int64N(400e6)
		key := "c" + strconv.Itoa(rng.IntN(4))
		id := "r" + strconv.Itoa(rng.IntN(40))
		if rng.IntN(8) == 0 {
			id += strings.Repeat("x", rng.IntN(200))
		}
		var args []string
		switch op := rng.IntN(10); {
		case op < 5:
			args = []string{"CONC.ACQUIRE", key, strconv.Itoa(1 + rng.IntN(30)), strconv.Itoa(1 + rng.IntN(20)), id}
		case op < 7:
			args = []string{"CONC.RELEASE", key, id}
		case op < 9:
			args = []string{"CONC.RENEW", key, id, strconv.Itoa(1 + rng.IntN(20))}
		default:
			args = []string{"CONC.GET", key}
		}
		want := ref.apply(now, args)
		got := do(m, now, args...)
		if want == "error" {
			if !strings.HasPrefix(got, "-") {
				t.Fatalf("step %d %v: %q, want an error", step, args, got)
			}
			continue
		}
		if got != want {
			t.Fatalf("step %d %v: %q, want %q", step, args, got, want)
		}
		s, at := m.keys.LockKey([]byte(key)), now
		if e, found, _ := s.GetKind([]byte(key), keyspace.KindLeases, at); found {
			if e.Inline() {
				inline++
			} else {
				objects++
			}
			enc, err := AppendState(nil, s, e)
			if err != nil || string(enc) != string(ref[key].AppendBinary(nil)) {
				s.Unlock()
				t.Fatalf("step %d: %s encodes as %x (%v), want %x", step, key, enc, err, ref[key].AppendBinary(nil))
			}
		} else if l := ref[key]; l != nil && !l.Empty(now) {
			s.Unlock()
			t.Fatalf("step %d: %s missing, the reference holds %d leases", step, key, l.Len())
		}
		s.Unlock()
	}
	if inline == 0 || objects == 0 {
		t.Fatalf("keys seen in their record %d times, as objects %d: the trace missed one form", inline, objects)
	}
	t.Logf("%s", fmt.Sprintf("keys in their record %d times, objects %d times", inline, objects))
}

// A CONC command on a key whose leases live in its record allocates only
// the new lease's id.
func TestConcInRecordAllocations(t *testing.T) {
	m := New(Options{})
	cmd := m.Lookup([]byte("conc.get"))
	args := [][]byte{[]byte("CONC.GET"), []byte("k")}
	do(m, t0, "CONC.ACQUIRE", "k", "10", "60", "a")
	do(m, t0, "CONC.ACQUIRE", "k", "10", "60", "b")
	var w resp.Writer
	var sc Scratch
	if a := testing.AllocsPerRun(1000, func() {
		w.Buf = w.Buf[:0]
		m.ApplyScratch(&sc, t0+1, cmd, args, &w)
	}); a != 0 {
		t.Errorf("CONC.GET: %.1f allocations", a)
	}
	renew := m.Lookup([]byte("conc.renew"))
	rargs := [][]byte{[]byte("CONC.RENEW"), []byte("k"), []byte("a"), []byte("60")}
	if a := testing.AllocsPerRun(1000, func() {
		w.Buf = w.Buf[:0]
		m.ApplyScratch(&sc, t0+2, renew, rargs, &w)
	}); a != 0 {
		t.Errorf("CONC.RENEW: %.1f allocations", a)
	}
}
