package shardmap

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/cluster"
)

// The issue's map, as written.
const twoGroups = `epoch: 1
groups:
  - id: g1
    slots: ["0-8191"]
    members: {a1: "127.0.0.1:7001@127.0.0.1:17001", a2: "127.0.0.1:7002@127.0.0.1:17002", a3: "127.0.0.1:7003@127.0.0.1:17003"}
  - id: g2
    slots: ["8192-12000", "12001-16383"]
    members: {b1: "127.0.0.1:7004@127.0.0.1:17004", b2: "127.0.0.1:7005@127.0.0.1:17005", b3: "127.0.0.1:7006@127.0.0.1:17006"}
`

func TestParseTheIssuesMap(t *testing.T) {
	m, err := Parse([]byte(twoGroups))
	if err != nil {
		t.Fatal(err)
	}
	if m.Epoch != 1 || len(m.Groups) != 2 {
		t.Fatalf("epoch %d, %d groups", m.Epoch, len(m.Groups))
	}
	for _, tc := range []struct {
		slot  int
		group string
	}{{0, "g1"}, {8191, "g1"}, {8192, "g2"}, {12000, "g2"}, {12001, "g2"}, {16383, "g2"}} {
		if g := m.Owner(tc.slot); g.ID != tc.group || !g.Owns(tc.slot) {
			t.Errorf("slot %d: owner %s, want %s", tc.slot, g.ID, tc.group)
		}
	}
	g, p, ok := m.Member("b2")
	if !ok || g.ID != "g2" || p.ClientAddr != "127.0.0.1:7005" || p.RaftAddr != "127.0.0.1:17005" {
		t.Fatalf("member b2: %v %+v %v", g, p, ok)
	}
	if ids := []string{m.Groups[0].Members[0].ID, m.Groups[0].Members[2].ID}; ids[0] != "a1" || ids[1] != "a3" {
		t.Fatalf("members are not in id order: %v", m.Groups[0].Members)
	}
	if _, _, ok := m.Member("c1"); ok {
		t.Fatal("an unknown member found")
	}
}

// Ranges in any of their forms; a field the map does not know is refused
// by name (a misspelled "slot:" would start a group owning nothing).
func TestParseForms(t *testing.T) {
	m, err := Parse([]byte(`epoch: 3
groups:
  - id: only
    slots: [0-100, 101, "102-16383"]
    members: {n1: "127.0.0.1:7001"}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ text, field string }{
		{"epoch: 3\ncomment: x\ngroups:\n  - id: only\n    slots: [0-16383]\n    members: {n1: \"127.0.0.1:7001\"}\n", "comment"},
		{"epoch: 3\ngroups:\n  - id: only\n    slot: [0-16383]\n    members: {n1: \"127.0.0.1:7001\"}\n", "slot"},
	} {
		if _, err := Parse([]byte(bad.text)); !errors.Is(err, ErrMap) || !strings.Contains(err.Error(), "field "+bad.field+" not found") {
			t.Errorf("a map with an unknown field %q: %v", bad.field, err)
		}
	}
	if m.Owner(101).ID != "only" || m.Groups[0].Members[0].RaftAddr != "127.0.0.1:17001" {
		t.Fatalf("%+v", m.Groups[0])
	}
	one := OneGroup([]cluster.Peer{{ID: "n1", ClientAddr: "a:1", RaftAddr: "a:2"}})
	if one.Owner(0).ID != "g1" || one.Owner(16383).ID != "g1" || one.Epoch != 0 {
		t.Fatalf("one group: %+v", one.Groups)
	}
}

// Every invalid map is refused with what is wrong, by name.
func TestParseRefuses(t *testing.T) {
	group := func(id, slots, members string) string {
		return "  - id: " + id + "\n    slots: " + slots + "\n    members: " + members + "\n"
	}
	m1 := `{a1: "127.0.0.1:7001"}`
	m2 := `{b1: "127.0.0.1:7002"}`
	for _, tc := range []struct{ text, want string }{
		{"groups:\n" + group("g1", `["0-16383"]`, m1), "epoch must be a positive integer"},
		{"epoch: 0\ngroups:\n" + group("g1", `["0-16383"]`, m1), "epoch must be a positive integer"},
		{"epoch: 1\n", "no groups"},
		{"epoch: 1\ngroups:\n" + group("g1", `["0-8191"]`, m1), "slots 8192-16383 are owned by no group"},
		{"epoch: 1\ngroups:\n" + group("g1", `["0-8191"]`, m1) + group("g2", `["8000-16383"]`, m2), "group g2's range 8000-16383 overlaps group g1's 0-8191 (slot 8000)"},
		{"epoch: 1\ngroups:\n" + group("g1", `["0-16384"]`, m1), `slot range "0-16384" is not <from>-<to> or one slot in 0-16383`},
		{"epoch: 1\ngroups:\n" + group("g1", `["9-3"]`, m1), `slot range "9-3" is not`},
		{"epoch: 1\ngroups:\n" + group("g1", `["a-b"]`, m1), `slot range "a-b" is not`},
		{"epoch: 1\ngroups:\n" + group("g1", `["-5"]`, m1), `slot range "-5" is not`},
		{"epoch: 1\ngroups:\n" + group("g1", `["0-8191"]`, m1) + group("g1", `["8192-16383"]`, m2), `group id "g1" appears twice`},
		{"epoch: 1\ngroups:\n" + group("g1", `["0-8191"]`, m1) + group("g2", `["8192-16383"]`, `{a1: "127.0.0.1:7002"}`), `member id "a1" is in groups g1 and g2`},
		{"epoch: 1\ngroups:\n" + group("g1", `["0-8191"]`, m1) + group("g2", `["8192-16383"]`, `{b1: "127.0.0.1:7001"}`), "address 127.0.0.1:7001 is used by members a1 and b1"},
		{"epoch: 1\ngroups:\n" + group("g1", `["0-16383"]`, `{}`), "group g1 has no members"},
		{"epoch: 1\ngroups:\n" + group("g1", `[]`, m1), "slots 0-16383 are owned by no group"},
		{"epoch: 1\ngroups:\n" + group("g1", `["0-16383"]`, `{a1: "nowhere"}`), "group g1"},
		{"epoch: 1\ngroups:\n" + group("", `["0-16383"]`, m1), "a group has no id"},
		{"epoch: 1\ngroups:\n" + group("g1", `["0-16383"]`, `{a1: "127.0.0.1:7001", a1: "127.0.0.1:7002"}`), "already defined"},
		{"epoch: [1]\n", "cannot unmarshal"},
	} {
		_, err := Parse([]byte(tc.text))
		if err == nil || !errors.Is(err, ErrMap) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
}

func TestRouter(t *testing.T) {
	m, err := Parse([]byte(twoGroups))
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRouter(m, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if _, mine := r.Route(100); !mine {
		t.Fatal("slot 100 is g1's")
	}
	if addr, mine := r.Route(9000); mine || addr != "" {
		t.Fatalf("slot 9000 before a leader is known: %s %v", addr, mine)
	}
	r.SetLeader(1, "127.0.0.1:7006")
	if addr, _ := r.Route(9000); addr != "127.0.0.1:7006" {
		t.Fatalf("slot 9000 with g2's leader known: %s", addr)
	}
	if got := r.OwnedRanges(); len(got) != 1 || got[0] != "0-8191" {
		t.Fatalf("owned: %v", got)
	}
	if _, err := NewRouter(m, "g9"); err == nil {
		t.Fatal("a router for no group")
	}
}

// Routing follows the groups' logged claims: the highest epoch claiming a
// slot wins; a slot no claim names (cut, not yet imported) stays with its
// last owner; a claim older than a group's last is ignored, so a stale
// report never routes a slot back.
func TestRouterFollowsClaims(t *testing.T) {
	m, err := Parse([]byte(twoGroups))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := NewRouter(m, "g1")
	r.SetLeader(1, "g2-leader")
	owner := func(s int) int { return r.Owner(s) }
	// g1 cuts 0-99 at epoch 2: nobody claims them, g1 keeps routing them
	// (its state machine answers TRYAGAIN).
	if !r.Claim(0, 2, [][2]int{{100, 8191}}) {
		t.Fatal("a newer claim changed nothing")
	}
	if _, mine := r.Route(50); !mine || r.Epoch() != 2 {
		t.Fatalf("a cut slot: owner %d, epoch %d", owner(50), r.Epoch())
	}
	// g2 imports them at epoch 2.
	r.Claim(1, 2, [][2]int{{0, 99}, {8192, 16383}})
	if addr, mine := r.Route(50); mine || addr != "g2-leader" {
		t.Fatalf("an imported slot routes to %q (mine %v)", addr, mine)
	}
	// A stale report of g1 (epoch 1, the file's) changes nothing.
	if r.Claim(0, 1, [][2]int{{0, 8191}}) || owner(50) != 1 {
		t.Fatalf("a stale claim moved slot 50 to group %d", owner(50)+1)
	}
	if got := r.Ranges(1); len(got) != 2 || got[0] != [2]int{0, 99} || got[1] != [2]int{8192, 16383} {
		t.Fatalf("g2's ranges %v", got)
	}
	// Back to g1 at epoch 3, learned by Moved before g1's full claim.
	r.Claim(1, 3, [][2]int{{8192, 16383}})
	r.Moved(0, 3, [][2]int{{0, 99}})
	if _, mine := r.Route(0); !mine || owner(99) != 0 || owner(100) != 0 || r.Epoch() != 3 {
		t.Fatalf("moved back: owner %d %d, epoch %d", owner(0), owner(99), r.Epoch())
	}
	if i, ok := r.GroupIndex("g2"); !ok || i != 1 {
		t.Fatal("GroupIndex")
	}
	// This member's own log is ahead of every claim: a slot it took is its
	// own at once, in routes and in its ranges.
	r.SetOwnLog(func(s int) bool { return s == 9000 })
	if _, mine := r.Route(9000); !mine || r.Owner(9001) != 1 || r.Ranges(0)[len(r.Ranges(0))-1] != [2]int{9000, 9000} {
		t.Fatalf("own log: route %d, ranges %v", r.Owner(9000), r.Ranges(0))
	}
}

// A running cluster's map, groups added and claims moved, written and read
// back: the same groups, slots and claim epochs.
func TestFormatRoundTrip(t *testing.T) {
	m, _ := Parse([]byte(twoGroups))
	r, _ := NewRouter(m, "g1")
	g3, err := r.AddGroup(Group{ID: "g3", Members: []cluster.Peer{{ID: "c1", ClientAddr: "127.0.0.1:7007", RaftAddr: "127.0.0.1:17007"}}})
	if err != nil || g3 != 2 {
		t.Fatal(g3, err)
	}
	r.Claim(0, 4, [][2]int{{100, 8191}})
	r.Claim(2, 4, [][2]int{{0, 99}})
	back, err := Parse(r.Format())
	if err != nil {
		t.Fatalf("%v\n%s", err, r.Format())
	}
	r2, _ := NewRouter(back, "g3")
	if back.Epoch != 4 || len(back.Groups) != 3 || r2.Owner(50) != 2 || r2.Owner(100) != 0 || r2.Owner(9000) != 1 ||
		r2.ClaimEpoch(1) != 1 || r2.ClaimEpoch(2) != 4 {
		t.Fatalf("read back:\n%s", r.Format())
	}
	// A claim of g2 at epoch 2 (below the map's 4, above its own 1) is
	// still taken: each group's claim keeps its own epoch.
	if !r2.Claim(1, 2, [][2]int{{8192, 16383}, {0, 49}}) {
		t.Fatal("a later claim of g2 ignored")
	}
}

// Members of different groups may share a Raft address (one process, one
// Raft port); two of one group may not, nor may a client address be one.
func TestSharedRaftAddresses(t *testing.T) {
	ok := "epoch: 1\ngroups:\n" +
		"  - id: g1\n    slots: [\"0-8191\"]\n    members: {a1: \"127.0.0.1:7001@127.0.0.1:9001\", a2: \"127.0.0.1:7002@127.0.0.1:9002\"}\n" +
		"  - id: g2\n    slots: [\"8192-16383\"]\n    members: {b1: \"127.0.0.1:7003@127.0.0.1:9001\", b2: \"127.0.0.1:7004@127.0.0.1:9002\"}\n"
	if _, err := Parse([]byte(ok)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		strings.Replace(ok, "127.0.0.1:7002@127.0.0.1:9002", "127.0.0.1:7002@127.0.0.1:9001", 1),
		strings.Replace(ok, "127.0.0.1:7004@127.0.0.1:9002", "127.0.0.1:9002@127.0.0.1:9003", 1),
	} {
		if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "is used by members") {
			t.Errorf("%v\n%s", err, bad)
		}
	}
}

// Two groups claiming a slot at one epoch — a member started with a map
// that splits the slots otherwise at the same epoch — is a conflict: no
// group is shown owning those slots (so CLUSTER NODES leaves them out and
// redis-cli --cluster check fails), until one group claims them at a
// later epoch. Claims at different epochs, as every migration step makes,
// are none.
func TestRouterConflicts(t *testing.T) {
	m, err := Parse([]byte(twoGroups))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := NewRouter(m, "g1")
	if len(r.Conflicts()) != 0 {
		t.Fatalf("a map's own split conflicts: %+v", r.Conflicts())
	}
	// A migration: g2 claims 0-99 at epoch 2 after g1 cut them at 2.
	r.Claim(0, 2, [][2]int{{100, 8191}})
	r.Claim(1, 2, [][2]int{{0, 99}, {8192, 16383}})
	if len(r.Conflicts()) != 0 {
		t.Fatalf("a migration conflicts: %+v", r.Conflicts())
	}
	// A stale claim of g1 at epoch 1 still naming 0-99: older, no conflict.
	r.Claim(0, 1, [][2]int{{0, 8191}})
	if len(r.Conflicts()) != 0 {
		t.Fatalf("an older claim conflicts: %+v", r.Conflicts())
	}
	// g1 now claims 9000-9999 at g2's epoch 2: both own them at one epoch.
	r.Claim(0, 2, [][2]int{{100, 8191}, {9000, 9999}})
	c, ok := r.Conflict(9500)
	if !ok || c != (Conflict{From: 9000, To: 9999, A: 0, B: 1, Epoch: 2}) || len(r.Conflicts()) != 1 {
		t.Fatalf("the conflict: %+v %v, all %+v", c, ok, r.Conflicts())
	}
	if _, ok := r.Conflict(8999); ok {
		t.Fatal("slot 8999 is g2's alone")
	}
	if got := r.Describe(c); got != "slots 9000-9999 are claimed by groups g1 and g2 at epoch 2" {
		t.Fatal(got)
	}
	for g := range 2 {
		for _, rg := range r.Ranges(g) {
			if rg[0] <= 9999 && rg[1] >= 9000 {
				t.Fatalf("group %d is shown owning %v, which two groups claim", g, rg)
			}
		}
	}
	// g2 is given them at a later epoch: the conflict ends.
	r.Claim(1, 3, [][2]int{{0, 99}, {8192, 16383}})
	if len(r.Conflicts()) != 0 {
		t.Fatalf("after a later claim: %+v", r.Conflicts())
	}
	if r.Owner(9500) != 1 {
		t.Fatalf("slot 9500 goes to group %d", r.Owner(9500))
	}
	// Or the other group is removed: its claims count no more.
	r.Claim(0, 3, [][2]int{{100, 8191}, {9000, 9999}})
	if len(r.Conflicts()) != 1 {
		t.Fatalf("g1 claiming 9000-9999 at g2's epoch 3: %+v", r.Conflicts())
	}
	r.RemoveGroup(0)
	if len(r.Conflicts()) != 0 {
		t.Fatalf("after g1 was removed: %+v", r.Conflicts())
	}
}
