package tests

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A go-redis ClusterClient follows a group's failover when it reloads its
// slot map on a short interval, as the README advises: go-redis reloads
// on MOVED, but a dead master cannot answer MOVED, and a dial error does
// not make it reload (its default interval is a minute). sluice's own
// topology names the new leader within a second of the election; the
// client is what has to ask.
func TestClusterClientFollowsAFailoverWithAShortReload(t *testing.T) {
	sc := StartShardedCluster(t, 3, [][]string{{"0-8191"}, {"8192-16383"}})
	old := sc.Leader(t, 0)
	sc.Leader(t, 1)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8,
		ClusterStateReloadInterval: time.Second, DialTimeout: time.Second, ReadTimeout: 3 * time.Second})
	t.Cleanup(func() { cc.Close() })
	key := "" // one of g1's slots
	for i := 0; key == "" || cc.ClusterKeySlot(ctx(t), key).Val() >= 8192; i++ {
		key = "failover" + strconv.Itoa(i)
	}
	eventually(t, "a first call through the ClusterClient", func() bool {
		return cc.Do(ctx(t), "CL.THROTTLE", key, 100, 100, 60).Err() == nil
	})
	old.Kill()
	failed := 0
	eventually(t, "the ClusterClient reaching g1's new leader", func() bool {
		if err := cc.Do(ctx(t), "CL.THROTTLE", key, 100, 100, 60).Err(); err != nil {
			failed++
			return false
		}
		return true
	})
	leader := sc.Leader(t, 0)
	if leader == old {
		t.Fatal("the killed member still leads")
	}
	t.Logf("calls that failed during the failover: %d", failed)
}
