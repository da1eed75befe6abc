package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/netproxy"
)

// A leader cut off from the majority (every Raft link to and from it
// through a proxy that stops forwarding) admits nothing from then on: its
// clients get errors or redirects, the majority elects another leader and
// goes on, and after the heal the old leader holds none of what it was
// asked while cut off.
func TestClusterPartitionedLeaderAdmitsNothing(t *testing.T) {
	const n = 3
	// proxies[i][j] carries node i's Raft traffic to node j.
	var proxies [n][n]*netproxy.Proxy
	c := StartCluster(t, n, func(i int, raft []string) []string {
		var via []string
		for j := range n {
			if j == i {
				continue
			}
			p := newProxy(t, raft[j])
			proxies[i][j] = p
			via = append(via, fmt.Sprintf("n%d=%s", j+1, p.Addr()))
		}
		return []string{"--raft-dial-via", strings.Join(via, ",")}
	})
	t0 := time.Now()
	leader := c.Leader()
	t.Logf("%v: leader", time.Since(t0))
	li := -1
	for i, s := range c.Nodes {
		if s == leader {
			li = i
		}
	}
	lc := leader.Client(func(o *redis.Options) { o.MaxRetries = -1; o.ReadTimeout = 5 * time.Second })
	if r := ints(t, lc.Do(ctx(t), "CL.THROTTLE", "{before}", 5, 10, 60)); r[0] != 0 {
		t.Fatalf("before the partition: %v", r)
	}
	for j := range n {
		if j != li {
			proxies[li][j].Partition()
			proxies[j][li].Partition()
		}
	}
	cut := time.Now()
	var refused []string
	for k := 0; time.Since(cut) < 2500*time.Millisecond; k++ {
		key := fmt.Sprintf("{cut%d}", k)
		v, err := lc.Do(ctx(t), "CL.THROTTLE", key, 5, 10, 60).Result()
		if err == nil {
			t.Fatalf("%v after the cut, the old leader answered %v: an admission no majority holds", time.Since(cut), v)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "MOVED ") && !strings.HasPrefix(msg, "CLUSTERDOWN") && !strings.HasPrefix(msg, "TRYAGAIN") &&
			!strings.Contains(msg, "outcome is unknown") {
			t.Fatalf("after the cut: %v", err)
		}
		refused = append(refused, key)
	}
	t.Logf("%v: %d requests refused while cut off", time.Since(t0), len(refused))
	// The majority goes on.
	var others []*Server
	for i, s := range c.Nodes {
		if i != li {
			others = append(others, s)
		}
	}
	var newLeader *Server
	eventually(t, "a leader in the majority", func() bool {
		for _, s := range others {
			if role(t, s) == "master" {
				newLeader = s
				return true
			}
		}
		return false
	})
	t.Logf("%v: new leader", time.Since(t0))
	nc := newLeader.Client()
	if r := ints(t, nc.Do(ctx(t), "CL.THROTTLE", "{after}", 5, 10, 60)); r[0] != 0 {
		t.Fatalf("the majority's leader: %v", r)
	}
	for j := range n {
		for i := range n {
			if proxies[i][j] != nil {
				proxies[i][j].Heal()
			}
		}
	}
	t.Logf("%v: healed", time.Since(t0))
	d := c.SameDigests()
	t.Logf("%v: same digests", time.Since(t0))
	if role(t, leader) != "slave" {
		t.Fatal("the old leader did not rejoin as a follower")
	}
	for len(refused) > 0 {
		batch := refused[:min(len(refused), 1000)]
		refused = refused[len(batch):]
		if n, err := nc.Exists(ctx(t), batch...).Result(); err != nil || n != 0 {
			t.Fatalf("%d keys refused by the cut-off leader exist after the heal (%v)", n, err)
		}
	}
	t.Logf("digest after the heal %s", d)
}
