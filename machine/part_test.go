package machine

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// outcome applies args and returns the typed outcome with the reply.
func outcome(m *Machine, now int64, args ...string) (Outcome, string) {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	var w resp.Writer
	o := m.ApplyArgs(now, b, &w)
	o.Statuses = slices.Clone(o.Statuses)
	return o, string(w.Buf)
}

// A part of an RL.SHOULDRATELIMIT across groups: RESERVE charges as the
// command does and holds it; CANCEL gives every unit back; left to expire,
// it keeps them.
func TestPartReserveKeepCancelOfShouldRateLimit(t *testing.T) {
	m := loadRLS(t)
	rules := m.RulesDigest("another")
	if rules == NoRules || m.RulesDigest("") == NoRules || m.RulesDigest("nope") != NoRules {
		t.Fatalf("digests: %q %q %q", rules, m.RulesDigest(""), m.RulesDigest("nope"))
	}
	reserve := func(now int64, id string) string {
		return compact(t, do(m, now, "RL.PART", "RESERVE", rules, id, "60", "RL.SHOULDRATELIMIT", "another", "1",
			"1", "3", "-", "-", "key2", "a", "1", "-", "-", "-", "free", "x"))
	}
	remaining := func(now int64) string {
		// hits 0: checks without charging.
		return compact(t, do(m, now, "RL.SHOULDRATELIMIT", "another", "1", "1", "0", "-", "-", "key2", "a"))
	}
	if got := reserve(t0, "p1"); got != `1 | 1 20 minute "" 17 60 0 20 60 | 1 -1 "" "" 4294967295 -1 0 -1 0` {
		t.Fatalf("reserve: %s", got)
	}
	if got := reserve(t0, "p1"); !strings.Contains(got, "held already") {
		t.Fatalf("a replayed part charged again: %s", got)
	}
	at := keySlot(t, m)
	if got := do(m, t0+1, "RL.PART", "CANCEL", "another", "p1", "60", at); !strings.HasSuffix(got, ":3\r\n:0\r\n:3\r\n:0\r\n") {
		t.Fatalf("cancel: %q", got)
	}
	if got := remaining(t0 + 2); !strings.Contains(got, " 20 60 0 ") {
		t.Fatalf("after cancel: %s", got)
	}
	// Left alone, the reservation expires after its ttl and the charge
	// stays: what an admitted check's parts do.
	do(m, t0+3, "RL.PART", "RESERVE", rules, "p2", "1", "RL.SHOULDRATELIMIT", "another", "1", "1", "3", "-", "-", "key2", "a")
	if got := do(m, t0+3+2e9, "RL.PART", "CANCEL", "another", "p2", "60", at); got != "$-1\r\n" {
		t.Fatalf("a cancel after the ttl: %q", got)
	}
	if got := remaining(t0 + 3e9); !strings.Contains(got, " 17 ") {
		t.Fatalf("after the ttl: %s", got)
	}
	// DECIDE is the command itself, decided once.
	d := compact(t, do(m, t0+4e9, "RL.PART", "DECIDE", rules, "RL.SHOULDRATELIMIT", "another", "2", "1", "-", "-", "-", "key2", "a"))
	if d != `1 | 1 20 minute "" 15 56 0 20 60` {
		t.Fatalf("decide: %s", d)
	}
	// The ttl is exact: held until its last nanosecond, gone at it.
	slotOf := at
	for i, at := range []int64{1e9 - 1, 1e9} {
		id, start := "p"+strconv.Itoa(3+i), t0+int64(10+i)*1e9
		do(m, start, "RL.PART", "RESERVE", rules, id, "1", "RL.SHOULDRATELIMIT", "another", "1", "1", "1", "-", "-", "key2", "a")
		got := do(m, start+at, "RL.PART", "CANCEL", "another", id, "60", slotOf)
		if held := got != "$-1\r\n"; held != (at < 1e9) {
			t.Fatalf("a cancel %d ns after a 1 s part: %q", at, got)
		}
	}
}

// A part decided by other rules is refused, naming both digests, and
// charges nothing; malformed parts are errors, never a panic.
func TestPartRefusedWhenRulesDiffer(t *testing.T) {
	m := loadRLS(t)
	mine := m.RulesDigest("another")
	got := do(m, t0, "RL.PART", "DECIDE", "0123456789abcdef", "RL.SHOULDRATELIMIT", "another", "5", "1", "-", "-", "-", "key2", "a")
	if !strings.HasPrefix(got, "-ERR RULESDIFFER") || !strings.Contains(got, "0123456789abcdef") || !strings.Contains(got, mine) {
		t.Fatalf("got %q", got)
	}
	if got := compact(t, do(m, t0+1, "RL.SHOULDRATELIMIT", "another", "1", "1", "0", "-", "-", "key2", "a")); !strings.Contains(got, " 20 60 0 ") {
		t.Fatalf("the refused part charged: %s", got)
	}
	for _, bad := range [][]string{
		{"RL.PART", "APPLY"}, {"RL.PART", "RESERVE"}, {"RL.PART", "RESERVE", mine, "id", "60", "GET", "x"},
		{"RL.PART", "DECIDE", mine, "RL.CHECK"}, {"RL.PART", "RESERVE", mine, "id", "0", "RL.CHECK", "another", "DESCRIPTOR", "k", "v"},
		{"RL.PART", "CANCEL", "another"}, {"RL.PART", "KEEP", "another", "p"}, {"RL.PART", "NOPE"}, {"RL.PART", "DIGEST", "a", "b"},
	} {
		if got := do(m, t0, bad...); !strings.HasPrefix(got, "-ERR") {
			t.Errorf("%q: %q", bad, got)
		}
	}
	if got := do(m, t0, "RL.PART", "DIGEST", "another"); got != "$16\r\n"+mine+"\r\n" {
		t.Errorf("digest: %q", got)
	}
}

// The rules digest is of the rules, not of how they were loaded: the same
// files in another order have the same set digest; another file changes
// its domain's.
func TestRulesDigestFollowsTheRules(t *testing.T) {
	a, b := New(Options{}), New(Options{})
	other := "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
	do(a, t0, "RL.RULES", "LOAD", "r.yaml", rlsRules, "o.yaml", other)
	do(b, t0, "RL.RULES", "LOAD", "o.yaml", other, "r.yaml", rlsRules)
	if a.RulesDigest("") != b.RulesDigest("") || a.RulesDigest("other") != b.RulesDigest("other") {
		t.Fatal("the same rules in another order differ")
	}
	do(b, t0, "RL.RULES", "LOAD", "o.yaml", strings.Replace(other, "1}", "2}", 1))
	if a.RulesDigest("other") == b.RulesDigest("other") || a.RulesDigest("another") != b.RulesDigest("another") ||
		a.RulesDigest("") == b.RulesDigest("") {
		t.Fatal("a changed file did not change its domain's digest alone")
	}
}

// Split says where each descriptor's words are and which slot its counter
// is in: the words put back together are the command, and each slot is
// the slot of the key the command charges (found by applying each
// descriptor alone).
func TestSplitFindsEachCounterSlot(t *testing.T) {
	m := loadRLS(t)
	args := [][]byte{[]byte("RL.SHOULDRATELIMIT"), []byte("another"), []byte("1")}
	words := []string{"key2", "key3", "free", "nothing", "shadow"}
	for i, k := range words {
		args = append(args, []byte("1"), []byte("-"), []byte("-"), []byte("-"), []byte(k), []byte{byte('a' + i)})
	}
	args = append(args, []byte("1"), []byte("2"), []byte("5"), []byte("minute"), []byte("own"), []byte("x"))
	head, descs, bad := m.Split(args, nil)
	if bad != "" || len(head) != 1 || string(head[0]) != "1" || len(descs) != 6 {
		t.Fatalf("%q %d %q", head, len(descs), bad)
	}
	for i, d := range descs {
		alone := append(slices.Clone(args[:3]), d.Words...)
		before := allKeys(m)
		var w resp.Writer
		m.ApplyArgs(t0, alone, &w)
		var made []string
		for _, k := range allKeys(m) {
			if !slices.Contains(before, k) {
				made = append(made, k)
			}
		}
		switch {
		case d.Slot < 0 && len(made) != 0:
			t.Errorf("descriptor %d has no counter but made %q", i, made)
		case d.Slot >= 0 && (len(made) != 1 || slot.Of([]byte(made[0])) != d.Slot):
			t.Errorf("descriptor %d: slot %d, made %q", i, d.Slot, made)
		}
	}
	var buf [8]SplitDescriptor
	if n := testing.AllocsPerRun(100, func() { m.Split(args, buf[:0]) }); n != 0 && !raceEnabled { // the race detector allocates
		t.Errorf("Split into a buffer with room allocated %v times", n)
	}
	if descs[2].Status.Remaining != 4294967295 || descs[3].Status.RequestsPerUnit != -1 || descs[5].Hits != 2 {
		t.Errorf("statuses: %+v", descs)
	}
	check := [][]byte{[]byte("RL.CHECK"), []byte("another"), []byte("COST"), []byte("3"),
		[]byte("DESCRIPTOR"), []byte("key2"), []byte("a"), []byte("DESCRIPTOR"), []byte("free"), []byte("b"), []byte("c"), []byte("d")}
	head, descs, bad = m.Split(check, nil)
	if bad != "" || len(head) != 2 || string(head[1]) != "3" || len(descs) != 2 || len(descs[0].Words) != 3 || len(descs[1].Words) != 5 ||
		string(descs[1].Words[4]) != "d" || descs[0].Slot < 0 || descs[1].Slot >= 0 || descs[0].Hits != 3 {
		t.Fatalf("%q %+v %q", head, descs, bad)
	}
	// Put back together, the words are the command.
	whole := append(slices.Clone(check[:2]), head...)
	for _, d := range descs {
		whole = append(whole, d.Words...)
	}
	if !slices.EqualFunc(whole, check, bytes.Equal) {
		t.Fatalf("the words put back together: %q", whole)
	}
}

// What a refused check's admitted descriptors say is the same in one group
// and across groups: the statuses of a group's part that admitted, as
// Uncharged reads them, equal those one group answers for the same
// check refused by another descriptor — over random counts and hits.
func TestUnchargedStatusesMatchOneGroup(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for trial := range 200 {
		one, part := loadRLS(t), loadRLS(t)
		used, used3 := rng.IntN(25), rng.IntN(12)
		for _, m := range []*Machine{one, part} {
			// The same history: some units of key2 used, key3 and the
			// smooth limit maybe.
			do(m, t0, "RL.SHOULDRATELIMIT", "another", itoa(int64(used)), "1", "-", "-", "-", "key2", "a")
			do(m, t0, "RL.SHOULDRATELIMIT", "another", itoa(int64(used3)), "1", "-", "-", "-", "key3", "b")
		}
		hits := itoa(int64(rng.IntN(30)))
		descs := []string{"1", hits, "-", "-", "key2", "a", "1", "-", "-", "-", "key3", "b"}
		// The refusal: a limit of 0 refuses any request.
		refuse := []string{"1", "-", "-", "-", "block", "z"}
		full := append(append([]string{"RL.SHOULDRATELIMIT", "another", "1"}, descs...), refuse...)
		want, _ := outcome(one, t0+1, full...)
		got, reply := outcome(part, t0+1, append([]string{"RL.PART", "RESERVE", part.RulesDigest("another"), "id", "60",
			"RL.SHOULDRATELIMIT", "another", "1"}, descs...)...)
		if got.Err != "" {
			t.Fatal(reply)
		}
		if !want.Limited {
			t.Fatalf("trial %d: the check with a blocking descriptor was admitted", trial)
		}
		hitsOf := []int64{int64(len(hits)), 1}
		hitsOf[0], _ = resp.ParseInt([]byte(hits))
		for i := range 2 {
			st := got.Statuses[i]
			if !got.Limited {
				st = st.Uncharged(hitsOf[i])
			}
			if st != want.Statuses[i] {
				t.Fatalf("trial %d descriptor %d: across groups %+v, one group %+v", trial, i, st, want.Statuses[i])
			}
		}
	}
}

// A part's cancel that finds nothing held (the reserve's answer was lost,
// and the reserve itself is still on its way) leaves a tombstone for its
// ttl: the late reserve is refused and charges nothing, RL.CHECK's and
// RL.SHOULDRATELIMIT's alike; cancelling again leaves it; it encodes and
// moves as a record; after the ttl the id is free.
func TestPartCancelBeforeItsReserveLeavesATombstone(t *testing.T) {
	m := loadRLS(t)
	rules := m.RulesDigest("another")
	remaining := func(now int64) string {
		return compact(t, do(m, now, "RL.SHOULDRATELIMIT", "another", "1", "1", "0", "-", "-", "key2", "a"))
	}
	before := remaining(t0)
	at := keySlot(t, m)
	if got := do(m, t0+1, "RL.PART", "CANCEL", "another", "late", "10", at); got != "$-1\r\n" {
		t.Fatalf("cancel of nothing held: %q", got)
	}
	if got := do(m, t0+2, "RL.PART", "CANCEL", "another", "late", "10", at); got != "$-1\r\n" {
		t.Fatalf("a second cancel: %q", got)
	}
	rls := compact(t, do(m, t0+3, "RL.PART", "RESERVE", rules, "late", "10", "RL.SHOULDRATELIMIT", "another", "1",
		"1", "3", "-", "-", "key2", "a"))
	if !strings.Contains(rls, "held already") {
		t.Fatalf("a late RL.SHOULDRATELIMIT part after its cancel: %s", rls)
	}
	if got := compact(t, do(m, t0+4, "RL.PART", "RESERVE", rules, "late", "10", "RL.CHECK", "another", "COST", "3",
		"DESCRIPTOR", "key2", "a")); !strings.HasPrefix(got, "-TRYAGAIN the reservation id was cancelled") {
		t.Fatalf("a late RL.CHECK part after its cancel: %s", got)
	}
	if got := remaining(t0 + 5); got != before {
		t.Fatalf("a late part charged: %s, was %s", got, before)
	}
	// Settling it gives nothing and leaves it.
	if got := do(m, t0+6, "RL.CANCEL", "another", "late"); got != "$-1\r\n" {
		t.Fatalf("RL.CANCEL of a tombstone: %q", got)
	}
	// The tombstone encodes as a record (snapshots, slot moves) and
	// decodes as one; one holding limits is corrupt.
	dead := &ReservationState{Cancelled: true, Reply: CheckResult{Limited: true, Limit: -1, Remaining: -1, RetryAfter: -1}}
	back, err := decodeReservation(dead.AppendBinary(nil))
	if err != nil || !back.Cancelled || !back.Reply.Limited || len(back.Limits) != 0 {
		t.Fatalf("tombstone round trip: %+v %v", back, err)
	}
	dead.Limits = []HeldLimit{{Charge: limiters.Charge{Key: []byte("k"), Kind: keyspace.KindGCRA, Units: 1}}}
	if _, err := decodeReservation(dead.AppendBinary(nil)); err == nil {
		t.Fatal("a tombstone holding limits decoded")
	}
	// A cancel without a ttl leaves none (RL.CANCEL's and old senders').
	do(m, t0+8, "RL.PART", "CANCEL", "another", "plain")
	if got := compact(t, do(m, t0+9, "RL.PART", "RESERVE", rules, "plain", "10", "RL.CHECK", "another",
		"DESCRIPTOR", "key2", "a")); !strings.HasPrefix(got, "0 ") {
		t.Fatalf("a reserve after a cancel with no ttl: %s", got)
	}
	// After its ttl the id is free again.
	if got := compact(t, do(m, t0+1+10e9, "RL.PART", "RESERVE", rules, "late", "10", "RL.CHECK", "another",
		"DESCRIPTOR", "key2", "a")); !strings.HasPrefix(got, "0 ") {
		t.Fatalf("a reserve after the tombstone's ttl: %s", got)
	}
	for _, bad := range [][]string{{"RL.PART", "CANCEL", "another", "id", "0"}, {"RL.PART", "CANCEL", "another", "id", "x"},
		{"RL.PART", "CANCEL", "another", "id", "1", "x"}, {"RL.PART", "CANCEL", "another", "id", "1", "16384"}} {
		if got := do(m, t0+9, bad...); !strings.HasPrefix(got, "-ERR") {
			t.Fatalf("%v: %q", bad, got)
		}
	}
}

// A typed part is the RL.PART entry the group logs, and its apply's
// outcome reads back as the typed result: RL.CHECK's and
// RL.SHOULDRATELIMIT's alike, a rules mismatch as ErrRulesDiffer.
func TestPartRequestIsItsEntry(t *testing.T) {
	m := loadRLS(t)
	rules := m.RulesDigest("another")
	check := [][]byte{[]byte("RL.CHECK"), []byte("another"), []byte("COST"), []byte("2"), []byte("DESCRIPTOR"), []byte("key2"), []byte("a")}
	head, descs, bad := m.Split(check, nil)
	if bad != "" {
		t.Fatal(bad)
	}
	apply := func(now int64, req *PartRequest) (PartResult, error) {
		cmd, err := req.Command()
		if err != nil {
			t.Fatal(err)
		}
		var w resp.Writer
		out := m.ApplyArgs(now, cmd, &w)
		return PartOf(req.Kind, out)
	}
	req := &PartRequest{Kind: PartReserve, Domain: "another", Rules: rules, ID: "r1", TTL: 10, Head: head,
		Descriptors: [][][]byte{descs[0].Words}}
	res, err := apply(t0, req)
	if err != nil || res.Limited || res.Check.Limit != 20 || res.Check.Remaining != 18 || res.Check.Name == "" {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	res, err = apply(t0+1, &PartRequest{Kind: PartCancel, Domain: "another", ID: "r1", TTL: 10, Slots: []int{descs[0].Slot}})
	if err != nil || !res.Held {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	if res, err = apply(t0+2, &PartRequest{Kind: PartCancel, Domain: "another", ID: "r1", TTL: 10, Slots: []int{descs[0].Slot}}); err != nil || res.Held {
		t.Fatalf("a second cancel: %+v %v", res, err)
	}
	rls := [][]byte{[]byte("RL.SHOULDRATELIMIT"), []byte("another"), []byte("1"), []byte("1"), []byte("-"), []byte("-"), []byte("-"), []byte("key2"), []byte("a")}
	head, descs, _ = m.Split(rls, nil)
	res, err = apply(t0+3, &PartRequest{Kind: PartDecide, RLS: true, Domain: "another", Rules: rules, Head: head, Descriptors: [][][]byte{descs[0].Words}})
	if err != nil || len(res.Statuses) != 1 || res.Statuses[0].Remaining != 19 {
		t.Fatalf("decide: %+v %v", res, err)
	}
	_, err = apply(t0+4, &PartRequest{Kind: PartDecide, RLS: true, Domain: "another", Rules: "other", Head: head, Descriptors: [][][]byte{descs[0].Words}})
	if !errors.Is(err, ErrRulesDiffer) || !strings.Contains(err.Error(), "RULESDIFFER") {
		t.Fatalf("other rules: %v", err)
	}
	for _, bad := range []PartRequest{{Kind: PartReserve, Domain: "x"}, {Kind: PartCancel, Domain: "x"}, {Kind: 9, Domain: "x"}, {Kind: PartDecide}} {
		if _, err := bad.Command(); !errors.Is(err, ErrBadPart) {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
}

// keySlot is the slot of the counter loadRLS's rules keep for descriptor
// key2=a of domain another, where a part holding it is kept.
func keySlot(t *testing.T, m *Machine) string {
	t.Helper()
	rls := [][]byte{[]byte("RL.SHOULDRATELIMIT"), []byte("another"), []byte("1"), []byte("1"), []byte("0"), []byte("-"), []byte("-"), []byte("key2"), []byte("a")}
	_, descs, bad := m.Split(rls, nil)
	if bad != "" || len(descs) != 1 || descs[0].Slot < 0 {
		t.Fatalf("split: %q %+v", bad, descs)
	}
	return strconv.Itoa(descs[0].Slot)
}
