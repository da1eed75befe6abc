package tests

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A follower killed mid-traffic catches up to the same state; a member
// removed and added back does too.
func TestClusterFollowerCatchesUp(t *testing.T) {
	c := StartCluster(t, 3, nil, "--raft-snapshot-threshold", "200", "--raft-snapshot-interval", "200ms")
	cc := c.Client()
	write := func(n int) {
		for i := range n {
			if err := cc.Do(ctx(t), "SW.CHECK", fmt.Sprintf("{k%d}", i%50), 1000, 600, "EXACT").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(100)
	leader := c.Leader()
	f := c.Followers(leader)[0]
	f.Kill()
	write(600) // enough for a snapshot: the follower may catch up from it
	f.Start()
	c.SameDigests()

	// Remove the follower, write, add it back: it catches up again.
	lc := leader.Client()
	id := nodeID(c, f)
	if err := lc.Do(ctx(t), "RAFT", "REMOVE", id).Err(); err != nil {
		t.Fatal(err)
	}
	f.Kill()
	write(100)
	info, _ := lc.Do(ctx(t), "RAFT", "INFO").Result()
	if strings.Contains(fmt.Sprint(info), id+" ") {
		t.Fatalf("removed member still listed: %v", info)
	}
	f.Start()
	raftAddr := strings.SplitN(strings.Split(c.Peers, id+"=")[1], ",", 2)[0]
	client, bus, _ := strings.Cut(raftAddr, "@")
	if err := lc.Do(ctx(t), "RAFT", "ADD", id, client, bus).Err(); err != nil {
		t.Fatal(err)
	}
	write(50)
	c.SameDigests()
}

func nodeID(c *Cluster, s *Server) string {
	for i, n := range c.Nodes {
		if n == s {
			return fmt.Sprintf("n%d", i+1)
		}
	}
	return ""
}

// Clients following MOVED drive limiters whose limits cannot refill
// during the run, through repeated SIGKILLs of the leader: admissions never
// exceed the limit, and every acknowledged quota unit is still counted.
func TestClusterNoOverAdmission(t *testing.T) {
	c := StartCluster(t, 3, nil)
	const limit = 60
	keys := []struct {
		name string
		args []any
	}{
		{"gcra", []any{"CL.THROTTLE", "{g}", limit - 1, 1, 100000000}},
		{"exact", []any{"SW.CHECK", "{s}", limit, 100000000, "EXACT"}},
		{"quota", []any{"QUOTA.CHECK", "{q}", limit, "YEAR"}},
	}
	var admitted [3]atomic.Int64
	var errs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := c.Client()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := (w + i) % len(keys)
				r, err := cc.Do(ctx(t), keys[k].args...).Int64Slice()
				if err != nil {
					errs.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if r[0] == 0 {
					admitted[k].Add(1)
				}
				time.Sleep(time.Duration(2+w) * time.Millisecond)
			}
		}()
	}
	for range 3 {
		time.Sleep(400 * time.Millisecond)
		leader := c.Leader()
		leader.Kill()
		c.Leader() // another takes over
		leader.Start()
	}
	time.Sleep(400 * time.Millisecond)
	close(stop)
	wg.Wait()
	for i, k := range keys {
		if n := admitted[i].Load(); n > limit {
			t.Errorf("%s: %d admissions acknowledged, limit %d", k.name, n, limit)
		}
	}
	t.Logf("admitted %d/%d/%d of %d, %d errors", admitted[0].Load(), admitted[1].Load(), admitted[2].Load(), limit, errs.Load())
	cc := c.Client()
	var u []int64
	eventually(t, "QUOTA.GET", func() bool {
		var err error
		u, err = cc.Do(ctx(t), "QUOTA.GET", "{q}").Int64Slice()
		return err == nil
	})
	if u[0] < admitted[2].Load() || u[0] > limit {
		t.Fatalf("quota used %d after %d acknowledged admissions (limit %d): an acknowledged unit was lost", u[0], admitted[2].Load(), limit)
	}
	if admitted[0].Load() == 0 || admitted[1].Load() == 0 || admitted[2].Load() == 0 {
		t.Fatal("a key admitted nothing: the test tests nothing")
	}
	c.SameDigests()
	// redis-cli -c, given any node, follows MOVED to the leader after the
	// failovers.
	for _, s := range c.Nodes {
		if out := redisCLI(t, s.Addr, "-c", "CL.THROTTLE", "{after}", "5", "10", "60"); !strings.HasPrefix(out, "0\n6\n") {
			t.Fatalf("redis-cli -c via %s: %q", s.Addr, out)
		}
	}
}
