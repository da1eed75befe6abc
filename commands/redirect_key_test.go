package commands

import (
	"testing"

	"github.com/sluice-rl/sluice/shardmap"
	"github.com/sluice-rl/sluice/slot"
)

// A key of another group's slot is MOVED to that group's leader; while
// its leader is not known here (an election, a cut one way), to the last
// one known — never CLUSTERDOWN for a group that was heard from; a group
// never heard from is CLUSTERDOWN.
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
	if got := rep.RedirectKey(key); got == nil || got.Reply[:11] != "CLUSTERDOWN" {
		t.Fatalf("a group never heard from: %+v", got)
	}
	r.SetLeader(1, "127.0.0.1:7003")
	if got := rep.RedirectKey(key); got == nil || got.Reply != "MOVED "+itoa(int64(slot.Of(key)))+" 127.0.0.1:7003" {
		t.Fatalf("its leader known: %+v", got)
	}
	r.SetLeader(1, "")
	if got := rep.RedirectKey(key); got == nil || got.Reply != "MOVED "+itoa(int64(slot.Of(key)))+" 127.0.0.1:7003" {
		t.Fatalf("its leader not known now: %+v, want MOVED to the last one", got)
	}
}
