package machine

import (
	"errors"
	"strings"
	"testing"
)

// A reservation settled or cancelled keeps its id until its ttl would
// have ended: a late copy of its RL.RESERVE — held by a partition,
// retransmitted, applied after the settle — is refused and charges
// nothing, in a group whose slots never move (the head holds every limit)
// and in a sharded one (parts by slot). After the ttl the id is free.
func TestSettledIDRefusesALateReserve(t *testing.T) {
	for _, sharded := range []bool{false, true} {
		for _, end := range []string{"RL.SETTLE", "RL.CANCEL"} {
			name := end
			if sharded {
				name += "/sharded"
			}
			t.Run(name, func(t *testing.T) {
				m := New(Options{})
				atLevel(m, Level)
				do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
				if sharded {
					do(m, t0, "SLUICE.OWN", "1", "0-16383")
				}
				reserve := []string{"RL.RESERVE", "llm", "req-1", "60", "COST", "40", "DESCRIPTOR", "fixed", "a", "DESCRIPTOR", "gcra", "b"}
				check := func(now int64, key, v string) string {
					return five(t, do(m, now, "RL.CHECK", "llm", "COST", "0", "DESCRIPTOR", key, v))
				}
				if got := do(m, t0, reserve...); !strings.HasPrefix(got, "*7\r\n:0\r\n") {
					t.Fatalf("reserve: %q", got)
				}
				settle := []string{end, "llm", "req-1"}
				if end == "RL.SETTLE" {
					settle = append(settle, "15")
				}
				if got := do(m, t0+1, settle...); !strings.HasPrefix(got, "*2\r\n") {
					t.Fatalf("%s: %q", end, got)
				}
				fixed, gcra := check(t0+2, "fixed", "a"), check(t0+2, "gcra", "b")
				if got := do(m, t0+3, reserve...); !strings.HasPrefix(got, "-ERR reservation req-1 was settled") {
					t.Fatalf("a late copy of the reserve: %q, want refused", got)
				}
				if f, g := check(t0+4, "fixed", "a"), check(t0+4, "gcra", "b"); f != fixed || g != gcra {
					t.Fatalf("the late copy charged: fixed %s → %s, gcra %s → %s", fixed, f, gcra, g)
				}
				if got := do(m, t0+5, settle...); got != "$-1\r\n" {
					t.Fatalf("a second %s: %q", end, got)
				}
				if c := m.Reservations(); c.Held != 0 {
					t.Fatalf("a settled id counted as held: %+v", c)
				}
				// Its ttl over, the id is a new reservation's.
				if got := do(m, t0+60e9, reserve...); !strings.HasPrefix(got, "*7\r\n:0\r\n") {
					t.Fatalf("a reserve after the ttl: %q", got)
				}
			})
		}
	}
}

// A check's part across groups given back (RL.PART CANCEL found it held)
// is refused if a copy of it still arrives: a cancel confirmed is never
// undone.
func TestCancelledPartRefusesALateCopy(t *testing.T) {
	m := New(Options{})
	atLevel(m, Level)
	do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
	do(m, t0, "SLUICE.OWN", "1", "0-16383")
	args := [][]byte{[]byte("RL.CHECK"), []byte("llm"), []byte("COST"), []byte("7"), []byte("DESCRIPTOR"), []byte("fixed"), []byte("a")}
	head, descs, bad := m.Split(args, nil)
	if bad != "" {
		t.Fatal(bad)
	}
	req := PartRequest{Kind: PartReserve, Domain: "llm", Rules: m.RulesDigest("llm"), Head: head, ID: "part-1", TTL: 10,
		Descriptors: [][][]byte{descs[0].Words}}
	cmd, err := req.Command()
	if err != nil {
		t.Fatal(err)
	}
	str := func(cmd [][]byte) []string {
		var s []string
		for _, w := range cmd {
			s = append(s, string(w))
		}
		return s
	}
	if got := do(m, t0, str(cmd)...); !strings.HasPrefix(got, "*7\r\n:0\r\n:100\r\n:93\r\n") {
		t.Fatalf("the part: %q", got)
	}
	cancel := PartRequest{Kind: PartCancel, Domain: "llm", ID: "part-1", TTL: 10, Slots: []int{descs[0].Slot}}
	ccmd, _ := cancel.Command()
	if got := do(m, t0+1, str(ccmd)...); !strings.HasPrefix(got, "*1\r\n") {
		t.Fatalf("the cancel: %q", got)
	}
	if got := do(m, t0+2, str(cmd)...); !strings.HasPrefix(got, "-TRYAGAIN") {
		t.Fatalf("a copy of the cancelled part: %q, want refused", got)
	}
	if got := five(t, do(m, t0+3, "RL.CHECK", "llm", "COST", "0", "DESCRIPTOR", "fixed", "a")); !strings.HasPrefix(got, "0 100 100 ") {
		t.Fatalf("after the copy: %s", got)
	}
}

// A part past its coordinator's deadline is refused, typed; one within it,
// or with none (a coordinator of an earlier version), is not.
func TestPartLate(t *testing.T) {
	r := PartRequest{Kind: PartReserve, Deadline: t0}
	if err := r.Late(t0); err != nil {
		t.Fatalf("at the deadline: %v", err)
	}
	var pe *PartError
	if err := r.Late(t0 + 12e9); !errors.As(err, &pe) || !errors.Is(err, ErrPartLate) || !strings.Contains(pe.Reply, "12s after") {
		t.Fatalf("12 s past the deadline: %v", err)
	}
	if err := (&PartRequest{Kind: PartReserve}).Late(t0); err != nil {
		t.Fatalf("no deadline: %v", err)
	}
}
