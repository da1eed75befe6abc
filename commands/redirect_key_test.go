package commands

import (
	"testing"

	"github.com/sluice-rl/sluice/shardmap"
	"github.com/sluice-rl/sluice/slot"
)

// A key of another group's slot is MOVED to that group's leader; while
// its leader is not known here (an election, a group down, a cut one way)
// to the member CLUSTER SLOTS places the slot on — a member that answers,
// else the last leader, else the map's first — never CLUSTERDOWN, which
// would keep a client from a group it can reach for the cut's length.
func TestRedirectKeyToAnotherGroup(t *testing.T) {
	mp, err := shardmap.Parse([]byte(`epoch: 1
groups:
  - id: g1
    slots: ["0-8191"]
    members: {a1: "127.0.0.1:7001@127.0.0.1:17001"}
  - id: g2
    slots: ["8192-16383"]
    members: {b1: "127.0.0.1:7002@127.0.0.1:17002", b2: "127.0.0.1:7003@127.0.0.1:17003"}
`))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := shardmap.NewRouter(mp, "g1")
	key := []byte("k")
	for slot.Of(key) < 8192 {
		key = append(key, 'x')
	}
	rep := Replicated{Shards: r}
	moved := func(addr string) string { return "MOVED " + itoa(int64(slot.Of(key))) + " " + addr }
	if got := rep.RedirectKey(key); got == nil || got.Reply != moved("127.0.0.1:7002") {
		t.Fatalf("a group never heard from: %+v, want MOVED to its first member", got)
	}
	r.SetLeader(1, "127.0.0.1:7003")
	if got := rep.RedirectKey(key); got == nil || got.Reply != "MOVED "+itoa(int64(slot.Of(key)))+" 127.0.0.1:7003" {
		t.Fatalf("its leader known: %+v", got)
	}
	r.SetLeader(1, "")
	if got := rep.RedirectKey(key); got == nil || got.Reply != moved("127.0.0.1:7003") {
		t.Fatalf("its leader not known now: %+v, want MOVED to the last one", got)
	}
	r.SetAnswered(1, []string{"127.0.0.1:7002"})
	if got := rep.RedirectKey(key); got == nil || got.Reply != moved("127.0.0.1:7002") {
		t.Fatalf("its last leader silent, another member up: %+v, want MOVED to the one up", got)
	}
}
