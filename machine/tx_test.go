package machine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
)

func tx(m *Machine, now int64, watched []string, cmds ...[]string) string {
	args := []string{"EXEC", itoa(int64(len(watched) / 2))}
	args = append(args, watched...)
	for _, c := range cmds {
		args = append(args, itoa(int64(len(c))))
		args = append(args, c...)
	}
	return do(m, now, args...)
}

func TestTransactionApplies(t *testing.T) {
	m := New(Options{})
	got := tx(m, t0, nil,
		[]string{"CL.THROTTLE", "{a}k", "1", "1", "60"}, []string{"CL.THROTTLE", "{b}k", "1", "1", "60"},
		[]string{"CL.THROTTLE", "{a}k", "1", "1", "60"}, []string{"DBSIZE"}, []string{"CL.THROTTLE", "{a}k", "x", "1", "1"},
		[]string{"DEBUG", "APPLY-PANIC", "{c}p"}, []string{"EXISTS", "{a}k", "{b}k", "{c}p"})
	want := "*7\r\n*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n*5\r\n:0\r\n:2\r\n:0\r\n:-1\r\n:120\r\n" +
		":2\r\n-ERR value is not an integer or out of range\r\n-ERR internal error in debug|apply-panic\r\n:3\r\n"
	if got != want {
		t.Fatalf("transaction:\n%q\nwant\n%q", got, want)
	}
	// Every slot was released: a digest locks them all.
	if _, err := m.Digest(); err != nil {
		t.Fatal(err)
	}
	// FLUSHALL inside a transaction (every slot held).
	if got := tx(m, t0+1, nil, []string{"FLUSHALL"}, []string{"DBSIZE"}); got != "*2\r\n+OK\r\n:0\r\n" {
		t.Fatalf("FLUSHALL in a transaction: %q", got)
	}
}

// A watched key that changed since WATCH aborts the whole transaction.
func TestTransactionWatch(t *testing.T) {
	m := New(Options{})
	do(m, t0, "CL.THROTTLE", "w", "5", "1", "60")
	v := m.KeyVersion([]byte("w"), t0)
	absent := m.KeyVersion([]byte("none"), t0)
	if v == "-" || absent != "-" {
		t.Fatalf("versions %q %q", v, absent)
	}
	if got := tx(m, t0+1, []string{"w", v, "none", absent}, []string{"CL.THROTTLE", "x", "1", "1", "60"}); !strings.HasPrefix(got, "*1\r\n*5") {
		t.Fatalf("unchanged watch: %q", got)
	}
	do(m, t0+2, "CL.THROTTLE", "w", "5", "1", "60")
	if got := tx(m, t0+3, []string{"w", v}, []string{"DEL", "x"}); got != "*-1\r\n" {
		t.Fatalf("changed watch: %q", got)
	}
	if got := do(m, t0+4, "EXISTS", "x"); got != ":1\r\n" {
		t.Fatal("an aborted transaction applied")
	}
}

// Transactions over random sets of slots, beside single commands, from
// many goroutines: every transaction completes (slots are locked in
// order, so none deadlocks) and its commands see no one else between them.
func TestTransactionsConcurrently(t *testing.T) {
	m := New(Options{})
	var wg sync.WaitGroup
	var bad sync.Once
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			var w resp.Writer
			for i := range 300 {
				a, b := fmt.Sprintf("{s%d}k", rng.IntN(6)), fmt.Sprintf("{s%d}k", rng.IntN(6))
				if g%2 == 0 {
					w.Buf = w.Buf[:0]
					m.ApplyArgs(t0+int64(i), words("CL.THROTTLE", a, "1000000", "1", "1"), &w)
					continue
				}
				// Two increments of one counter with nothing between them:
				// the second reports one less remaining than the first.
				got := tx(m, t0+int64(i), nil, []string{"CL.THROTTLE", a, "1000000", "1", "1"},
					[]string{"CL.THROTTLE", b, "1000000", "1", "1"}, []string{"CL.THROTTLE", a, "1000000", "1", "1"})
				// Every transaction answers three throttle replies; an error
				// reply is a failure, not something to skip.
				parts := strings.Split(got, "\r\n")
				if !strings.HasPrefix(got, "*3\r\n*5\r\n") || len(parts) < 18 || strings.Contains(got, "\r\n-") {
					bad.Do(func() { t.Errorf("a transaction answered %q", got) })
					continue
				}
				first, second, third := mustInt(parts[4][1:]), mustInt(parts[10][1:]), mustInt(parts[16][1:])
				want := third + 1
				if a == b {
					// One counter three times: each one less.
					want = second + 1
					if second != third+1 {
						bad.Do(func() { t.Errorf("another apply came between a transaction's commands: %q", got) })
					}
				}
				if first != want {
					bad.Do(func() { t.Errorf("another apply came between a transaction's commands: %q", got) })
				}
			}
		}()
	}
	wg.Wait()
}

func mustInt(s string) int64 {
	v, _ := resp.ParseInt([]byte(s))
	return v
}

// RL.OVERRIDE and RL.SCALE inside a transaction write where they say they
// will, whatever the domain: braces, none at all, or plain (the
// transaction locked the domain's own slot, and the apply of a domain with
// braces or none, whose records are in its tag's slot, panicked). The
// empty domain's overrides share one slot, so LIST finds them all.
func TestPolicyAdminInTransactionAnyDomain(t *testing.T) {
	m := New(Options{})
	for _, domain := range []string{"", "a{b}c", "{}", "plain"} {
		got := tx(m, t0, nil,
			[]string{"RL.OVERRIDE", "SET", domain, "5", "minute", "DESCRIPTOR", "k", "v1"},
			[]string{"RL.OVERRIDE", "SET", domain, "6", "minute", "DESCRIPTOR", "k", "v2"},
			[]string{"RL.SCALE", "SET", domain, "0.5"})
		if got != "*3\r\n+OK\r\n+OK\r\n+OK\r\n" {
			t.Fatalf("domain %q: %q", domain, got)
		}
		list := do(m, t0, "RL.OVERRIDE", "LIST", domain)
		if !strings.HasPrefix(list, "*2\r\n") || !strings.Contains(list, "v1") || !strings.Contains(list, "v2") {
			t.Fatalf("domain %q: RL.OVERRIDE LIST %q, want both overrides", domain, list)
		}
		if r := do(m, t0, "RL.SCALE", "GET", domain); !strings.HasPrefix(r, "*3\r\n$8\r\n0.500000") {
			t.Fatalf("domain %q: RL.SCALE GET %q", domain, r)
		}
	}
}

// Each command's table entry declares what a transaction locks for it and
// whether it decides; the declarations agree with what they are for.
func TestCommandDeclarations(t *testing.T) {
	m := New(Options{})
	var deciders []string
	for _, c := range m.Commands() {
		if c.Decides {
			deciders = append(deciders, c.Name)
		}
	}
	slices.Sort(deciders)
	if got := strings.Join(deciders, " "); got != "cl.throttle conc.acquire fw.check gcra quota.check rl.check rl.checkall rl.lease rl.reserve rl.share rl.shouldratelimit sw.check" {
		t.Fatalf("deciding commands: %s", got)
	}
	for _, tc := range []struct {
		args []string
		all  bool
		n    int
	}{
		{[]string{"FLUSHALL"}, true, 0},
		{[]string{"RL.CHECK", "d", "DESCRIPTOR", "k", "v"}, true, 0},
		{[]string{"RL.RULES", "LIST"}, false, 1},
		{[]string{"RL.OVERRIDE", "LIST", "a{b}c"}, false, 1},
		{[]string{"CL.THROTTLE", "k", "1", "1", "1"}, false, 1},
	} {
		l := &room.SlotLocks{}
		b := words(tc.args...)
		m.slotsOf(l, m.Lookup(b[0]), b)
		if l.All != tc.all || len(l.Slots) != tc.n {
			t.Errorf("%v: all %v, slots %v", tc.args, l.All, l.Slots)
		}
	}
}
