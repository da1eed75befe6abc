package machine

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// keyInSlot is a key of slot s.
func keyInSlot(s int) string {
	tag := slot.Tag(s)
	return "{" + string(tag[:]) + "}k"
}

// A group told its slots refuses, inside the apply, every command for a
// slot it does not own — alone, in a transaction, and the multi-limit
// checks whose counters reach one — and changes nothing for it; an older
// map is refused, the same one again is a no-op, a later one replaces it;
// the ownership survives FLUSHALL and a snapshot.
func TestFencing(t *testing.T) {
	m := New(Options{})
	mine, theirs := keyInSlot(100), keyInSlot(9000)
	if got := do(m, t0, "CL.THROTTLE", theirs, "5", "10", "60"); !strings.HasPrefix(got, "*5") {
		t.Fatalf("before any map every slot is owned: %q", got)
	}
	if got := do(m, t0, "SLUICE.OWN", "2", "0-8191"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	for _, args := range [][]string{
		{"CL.THROTTLE", theirs, "5", "10", "60"},
		{"DEL", mine, theirs},
		{"GET", theirs},
		{"RL.CHECKALL", "LIMIT", theirs, "GCRA", "1", "2", "3"},
		{"EXEC", "0", "5", "CL.THROTTLE", theirs, "5", "10", "60"},
	} {
		got := do(m, t0+1, args...)
		if !strings.Contains(got, "TRYAGAIN slot 9000 is not this group's (cluster map epoch 2)") {
			t.Errorf("%q: %q", args, got)
		}
	}
	if got := do(m, t0+1, "EXISTS", theirs); !strings.Contains(got, "TRYAGAIN") {
		t.Fatalf("EXISTS on a slot not owned: %q", got)
	}
	if got := do(m, t0+1, "CL.THROTTLE", mine, "5", "10", "60"); !strings.HasPrefix(got, "*5") {
		t.Fatalf("an owned slot: %q", got)
	}
	// RL.CHECK: a counter in a slot not owned refuses the whole check, to be
	// asked again (TRYAGAIN: it went to a group that no longer owns it).
	do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
	var refused, allowed int
	for i := range 40 {
		got := do(m, t0+2, "RL.CHECK", "llm", "DESCRIPTOR", "fixed", strings.Repeat("v", i+1))
		switch {
		case strings.HasPrefix(got, "-TRYAGAIN the check's counters are not all in this group's slots"):
			refused++
		case strings.HasPrefix(got, "*7"):
			allowed++
		default:
			t.Fatalf("RL.CHECK: %q", got)
		}
	}
	if refused == 0 || allowed == 0 {
		t.Fatalf("counters spread over both halves: %d refused, %d allowed", refused, allowed)
	}
	// RL.PART HOLD keeps a reservation's head in its domain's slot, never
	// in a slot the group does not own.
	var domain string
	for i := 0; ; i++ {
		domain = "d" + strconv.Itoa(i)
		if slot.Of(append(policy.AppendDescriptorKey(nil, domain, nil), "#reservation:x"...)) >= 8192 {
			break
		}
	}
	if got := do(m, t0+2, "RL.PART", "HOLD", domain, "x", "60", "77", "100", "90", "-1", "0", "60", "fixed", "9", "3", "3"); !strings.HasPrefix(got, "-TRYAGAIN slot ") {
		t.Fatalf("RL.PART HOLD of a head in a slot not owned: %q", got)
	}
	if _, _, ok := m.HeldReserve(domain, []byte("x")); ok {
		t.Fatal("RL.PART HOLD kept a head in a slot not owned")
	}
	for _, k := range allKeys(m) {
		// theirs was made before the map; nothing since.
		if s := slot.Of([]byte(k)); s >= 8192 && k != theirs && k != "sluice:rules" && k != OwnershipKey {
			t.Errorf("a key in a slot not owned: %q (slot %d)", k, s)
		}
	}
	// Epochs only go forward.
	if got := do(m, t0+3, "SLUICE.OWN", "1", "0-16383"); !strings.HasPrefix(got, "-ERR stale cluster map: epoch 1, this group is at epoch 2") {
		t.Fatalf("an older map: %q", got)
	}
	if got := do(m, t0+3, "SLUICE.OWN", "2", "0-100"); !strings.HasPrefix(got, "-ERR cluster map epoch 2 already gave this group other slots") {
		t.Fatalf("the same epoch, other slots: %q", got)
	}
	if got := do(m, t0+3, "SLUICE.OWN", "2", "0-8191"); got != "+OK\r\n" {
		t.Fatalf("the same map again: %q", got)
	}
	do(m, t0+3, "FLUSHALL")
	if got := do(m, t0+3, "GET", theirs); !strings.Contains(got, "TRYAGAIN") {
		t.Fatalf("after FLUSHALL: %q", got)
	}
	// Through a snapshot.
	restored := snapshotCopy(t, m, nil)
	if got := do(restored, t0+4, "GET", theirs); !strings.Contains(got, "TRYAGAIN") {
		t.Fatalf("after a restore: %q", got)
	}
	if got := do(restored, t0+4, "SLUICE.OWN", "3", "8192-16383"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := do(restored, t0+4, "GET", mine); !strings.Contains(got, "TRYAGAIN slot 100 ") {
		t.Fatalf("a later map moved the slots: %q", got)
	}
	for _, bad := range [][]string{{"SLUICE.OWN", "0", "0-1"}, {"SLUICE.OWN", "1", "5-2"}, {"SLUICE.OWN", "1", "0-16384"}, {"SLUICE.OWN", "x", "1"}} {
		if got := do(restored, t0+4, bad...); !strings.HasPrefix(got, "-ERR ") {
			t.Errorf("%q: %q", bad, got)
		}
	}
	for i := 0; i < 12; i++ {
		enc := (&Ownership{Epoch: 7, Ranges: [][2]int{{0, 10}, {20, 16383}}}).AppendBinary(nil)
		if i < len(enc) {
			if o, err := decodeOwnership(enc[:i]); err == nil && o == nil {
				t.Fatal("nil without an error")
			}
		}
	}
}

// A held reservation whose counter's slot the group no longer owns is not
// settled here, and nothing changes. In a group that fences by a cluster
// map the part held in that slot went with it (a slot's move carries its
// reservations' parts): the settle is refused, typed ErrHeldElsewhere (the
// coordinator settles it where the parts are now). A reservation made
// before the group fenced by a map is one record, which does not move:
// CROSSSLOT, asking again does not help.
func TestSettleOfAReservationWhoseCounterMovedIsFenced(t *testing.T) {
	for _, sharded := range []bool{true, false} {
		m := New(Options{})
		do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
		if sharded {
			do(m, t0, "SLUICE.OWN", "1", "0-16383")
		}
		domainSlot := slot.Of([]byte("rl:{llm}#reservation:r"))
		var v string
		for i := 0; ; i++ {
			v = "v" + strings.Repeat("x", i)
			if s := slot.Of([]byte(counterKey(m, "llm", "fixed", v))); s != domainSlot {
				break
			}
		}
		counter := slot.Of([]byte(counterKey(m, "llm", "fixed", v)))
		if got := do(m, t0, "RL.RESERVE", "llm", "r", "60", "COST", "5", "DESCRIPTOR", "fixed", v); !strings.HasPrefix(got, "*7\r\n:0") {
			t.Fatalf("RL.RESERVE: %q", got)
		}
		// The group's slots, less the counter's.
		var ranges []string
		if counter > 0 {
			ranges = append(ranges, "0-"+strconv.Itoa(counter-1))
		}
		if counter < slot.Count-1 {
			ranges = append(ranges, strconv.Itoa(counter+1)+"-"+strconv.Itoa(slot.Count-1))
		}
		if got := do(m, t0+1, append([]string{"SLUICE.OWN", "2"}, ranges...)...); got != "+OK\r\n" {
			t.Fatalf("SLUICE.OWN without slot %d: %q", counter, got)
		}
		before := do(m, t0+2, "DEBUG", "DIGEST")
		var w resp.Writer
		out := m.ApplyArgs(t0+2, [][]byte{[]byte("RL.SETTLE"), []byte("llm"), []byte("r"), []byte("0")}, &w)
		got := string(w.Buf)
		switch {
		case sharded && (!strings.HasPrefix(got, "-TRYAGAIN slot "+strconv.Itoa(counter)+" is not this group's") || !errors.Is(out.Refusal, ErrHeldElsewhere)):
			t.Fatalf("RL.SETTLE with the counter's slot gone: %q %v", got, out.Refusal)
		case !sharded && !strings.HasPrefix(got, "-CROSSSLOT the check's counters are not all in this group's slots"):
			t.Fatalf("RL.SETTLE of a reservation made before the map, its counter's slot gone: %q", got)
		}
		if after := do(m, t0+2, "DEBUG", "DIGEST"); after != before {
			t.Fatal("a refused settle changed the state")
		}
	}
}

// decodeOwnership decodes an ownership record as a restore does.
func decodeOwnership(b []byte) (*Ownership, error) {
	obj, err := DecodeState(keyspace.KindOwnership, b, nil)
	o, _ := obj.(*Ownership)
	return o, err
}
