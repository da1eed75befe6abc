package commands

import (
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/clock"
)

// windowHarness runs commands in process, without a network, on a clock
// the test sets.
type windowHarness struct {
	t   testing.TB
	now int64
	env *Env
	ctx Ctx
}

func newWindowHarness(t testing.TB, now int64) *windowHarness {
	h := &windowHarness{t: t, now: now}
	h.env = newEnv(clock.New(func() int64 { return h.now }))
	h.ctx = Ctx{Env: h.env, Conn: &Conn{Proto: 2, Authenticated: true}, W: &Writer{Proto: 2}}
	return h
}

// do runs one command and returns its raw RESP reply.
func (h *windowHarness) do(args ...string) string {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	h.ctx.Reset()
	h.ctx.W.Buf = h.ctx.W.Buf[:0]
	h.env.Table.Dispatch(&h.ctx, bs)
	return string(h.ctx.W.Buf)
}

// limiter runs a limiter command and parses its five integers.
func (h *windowHarness) limiter(args ...string) [5]int64 {
	h.t.Helper()
	reply := h.do(args...)
	var out [5]int64
	lines := strings.Split(strings.TrimSuffix(reply, "\r\n"), "\r\n")
	if len(lines) != 6 || lines[0] != "*5" {
		h.t.Fatalf("%v: reply %q is not a limiter reply", args, reply)
	}
	for i, l := range lines[1:] {
		n, err := strconv.ParseInt(strings.TrimPrefix(l, ":"), 10, 64)
		if err != nil || l[0] != ':' {
			h.t.Fatalf("%v: reply %q is not a limiter reply", args, reply)
		}
		out[i] = n
	}
	return out
}

const windowT0 = int64(4102444800) * 1e9 // 2100-01-01, a multiple of every window used here

func TestWindowCommandErrors(t *testing.T) {
	h := newWindowHarness(t, windowT0)
	h.do("CL.THROTTLE", "gcra", "1", "1", "60")
	h.do("SW.CHECK", "counter", "5", "60")
	h.do("SW.CHECK", "log", "5", "60", "EXACT")
	h.do("FW.CHECK", "fixed", "5", "60")
	const wrongType = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"SW.CHECK", "k", "5"}, "-ERR wrong number of arguments for 'sw.check' command\r\n"},
		{[]string{"FW.CHECK", "k"}, "-ERR wrong number of arguments for 'fw.check' command\r\n"},
		{[]string{"SW.CHECK", "k", "five", "60"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"SW.CHECK", "k", "5", "1.5"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"FW.CHECK", "k", "5", "99999999999999999999"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"SW.CHECK", "k", "5", "60", "COST", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"SW.CHECK", "k", "0", "60"}, "-ERR limit must be positive\r\n"},
		{[]string{"FW.CHECK", "k", "-3", "60"}, "-ERR limit must be positive\r\n"},
		{[]string{"SW.CHECK", "k", "5", "0", "EXACT"}, "-ERR window must be positive\r\n"},
		{[]string{"FW.CHECK", "k", "5", "-60"}, "-ERR window must be positive\r\n"},
		{[]string{"SW.CHECK", "k", "5", "1000000001"}, "-ERR window must be at most 1000000000 seconds\r\n"},
		{[]string{"SW.CHECK", "k", "5", "60", "COST", "-1"}, "-ERR cost must not be negative\r\n"},
		{[]string{"FW.CHECK", "k", "5", "60", "cost", "-1"}, "-ERR cost must not be negative\r\n"},
		{[]string{"SW.CHECK", "k", "100001", "60", "EXACT"}, "-ERR limit must be at most 100000 for an exact window\r\n"},
		{[]string{"SW.CHECK", "k", "5", "60", "COST"}, "-ERR syntax error: COST needs a value\r\n"},
		{[]string{"SW.CHECK", "k", "5", "60", "COST", "1", "cost", "2"}, "-ERR syntax error: COST given more than once\r\n"},
		{[]string{"SW.CHECK", "k", "5", "60", "EXACT", "exact"}, "-ERR syntax error: EXACT given more than once\r\n"},
		{[]string{"SW.CHECK", "k", "5", "60", "FAST"}, "-ERR syntax error: unknown option 'FAST' (options are COST <n> and EXACT)\r\n"},
		{[]string{"FW.CHECK", "k", "5", "60", "EXACT"}, "-ERR syntax error: unknown option 'EXACT' (options are COST <n>)\r\n"},
		{[]string{"SW.CHECK", "gcra", "5", "60"}, wrongType},
		{[]string{"SW.CHECK", "counter", "5", "60", "EXACT"}, wrongType},
		{[]string{"SW.CHECK", "log", "5", "60"}, wrongType},
		{[]string{"FW.CHECK", "counter", "5", "60"}, wrongType},
		{[]string{"SW.CHECK", "fixed", "5", "60", "COST", "0"}, wrongType},
		{[]string{"CL.THROTTLE", "log", "1", "1", "60"}, wrongType},
		{[]string{"GET", "fixed"}, wrongType},
	} {
		if got := h.do(tc.args...); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := h.do("DBSIZE"); got != ":4\r\n" {
		t.Errorf("after refused commands DBSIZE = %q, want 4 keys", got)
	}
}

func TestWindowCommandOptionsAnyOrderAndCase(t *testing.T) {
	h := newWindowHarness(t, windowT0)
	a := h.limiter("sw.check", "a", "10", "60", "exact", "cost", "3")
	b := h.limiter("SW.CHECK", "b", "10", "60", "CoSt", "3", "ExAcT")
	if a != b || a != [5]int64{0, 10, 7, -1, 60} {
		t.Fatalf("EXACT COST 3 = %v, COST 3 EXACT = %v; want both [0 10 7 -1 60]", a, b)
	}
	for key, kind := range map[string]string{"a": "sliding-log", "b": "sliding-log"} {
		if got := h.do("TYPE", key); got != "+"+kind+"\r\n" {
			t.Errorf("TYPE %s = %q, want %s", key, got, kind)
		}
	}
}

// windowModel is an independent reference for the three commands: it
// keeps every admitted (instant, cost) and decides from the definitions in
// window/doc.go, in big rationals.
type windowModel struct {
	limit, window int64
	admitted      [][2]int64
}

// units sums the admitted costs with from ≤ instant < to.
func (m *windowModel) units(from, to int64) int64 {
	n := int64(0)
	for _, a := range m.admitted {
		if from <= a[0] && a[0] < to {
			n += a[1]
		}
	}
	return n
}

func (m *windowModel) allows(mode string, now, cost int64) bool {
	w := m.window
	start := now - now%w
	switch mode {
	case "fixed":
		return m.units(start, start+w)+cost <= m.limit
	case "exact":
		return m.units(now-w+1, now+1)+cost <= m.limit
	}
	// prev·(w − elapsed)/w + curr + cost ≤ limit
	est := new(big.Rat).SetFrac64(m.units(start-w, start)*(w-(now-start)), w)
	est.Add(est, big.NewRat(m.units(start, start+w)+cost, 1))
	return est.Cmp(big.NewRat(m.limit, 1)) <= 0
}

// Random traces through the command layer, checked against windowModel:
// the decisions, remaining for the exact modes, and that a key exists
// exactly while it holds units (peeks never create one).
func TestWindowCommandsAgainstModel(t *testing.T) {
	for _, mode := range []string{"counter", "exact", "fixed"} {
		t.Run(mode, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(mode))))
			const limit, windowSec = 10, 5
			w := int64(windowSec) * 1e9
			h := newWindowHarness(t, windowT0+rng.Int64N(w))
			m := &windowModel{limit: limit, window: w}
			cmd := "SW.CHECK"
			if mode == "fixed" {
				cmd = "FW.CHECK"
			}
			for step := range 3000 {
				switch rng.IntN(4) {
				case 0:
					h.now += rng.Int64N(3 * w)
				default:
					h.now += rng.Int64N(w / 5)
				}
				cost := rng.Int64N(4)
				args := []string{cmd, "k", strconv.Itoa(limit), strconv.Itoa(windowSec), "COST", strconv.FormatInt(cost, 10)}
				if mode == "exact" {
					args = append(args, "EXACT")
				}
				want := m.allows(mode, h.now, cost)
				got := h.limiter(args...)
				if (got[0] == 0) != want {
					t.Fatalf("step %d at +%d ns, cost %d: reply %v, model allows=%v", step, h.now-windowT0, cost, got, want)
				}
				if want && cost > 0 {
					m.admitted = append(m.admitted, [2]int64{h.now, cost})
				}
				if mode != "counter" {
					start := h.now - h.now%w
					used := m.units(start, start+w)
					if mode == "exact" {
						used = m.units(h.now-w+1, h.now+1)
					}
					if got[2] != max(0, limit-used) {
						t.Fatalf("step %d: remaining %d, model %d", step, got[2], limit-used)
					}
				}
				// The key exists exactly while it holds units.
				exists := h.do("EXISTS", "k") == ":1\r\n"
				start := h.now - h.now%w
				var holds bool
				switch mode {
				case "fixed":
					holds = m.units(start, start+w) > 0
				case "exact":
					holds = m.units(h.now-w+1, h.now+1) > 0
				case "counter": // the previous sub-window still counts
					holds = m.units(start-w, start+w) > 0
				}
				if exists != holds {
					t.Fatalf("step %d: key exists=%v, model holds units=%v", step, exists, holds)
				}
			}
		})
	}
}
