package tests

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/slot"
)

const ownRepliesRules = `domain: own
descriptors:
  - key: tenant
    rate_limit:
      name: tokens-per-day
      unit: day
      requests_per_unit: 100000000
      sluice: {algorithm: quota}
  - key: user
    rate_limit: {name: per-user, unit: day, requests_per_unit: 100000000}
`

// Every reply of concurrent settles and checks across two groups is its
// own command's: eight callers, each reserving and settling its own
// tenant's and user's counters (most in two groups, so the rows come
// back through the member channel) and asking RL.SHOULDRATELIMIT for its
// own pair, each with amounts no other caller uses. A reply carrying
// another caller's rows or statuses — the apply loop's scratch read on a
// member's gRPC goroutine after the next apply overwrote it — is a
// failure here, and a data race in the members' logs (-race build).
func TestConcurrentRepliesAcrossGroupsAreTheirOwn(t *testing.T) {
	sc := StartShardedCluster(t, 1, [][]string{{"0-8191"}, {"8192-16383"}}, "--rules", writeRules(t, "own.yaml", ownRepliesRules))
	waitShardedRules(t, sc, "own", 2)
	const callers, rounds = 8, 25
	// Each caller's tenant and user in different groups (the slot of
	// their counter keys, below 8192 or not), so its settles and checks go
	// across the member channel.
	rules, err := policy.Parse("own.yaml", []byte(ownRepliesRules))
	if err != nil {
		t.Fatal(err)
	}
	firstGroup := func(k, v string) bool {
		entries := []policy.Entry{{Key: k, Value: v}}
		return slot.Of(rules.Match(entries).AppendKey(nil, entries)) < 8192
	}
	pairs := make([][2]string, callers)
	for i := range callers {
		for k := 0; ; k++ {
			tenant, user := fmt.Sprintf("t%d-%d", i, k), fmt.Sprintf("u%d-%d", i, k)
			if firstGroup("tenant", tenant) != firstGroup("user", user) {
				pairs[i] = [2]string{tenant, user}
				break
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, callers*rounds*2)
	for i := range callers {
		wg.Go(func() {
			cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
			defer cc.Close()
			tenant, user := pairs[i][0], pairs[i][1]
			var used int64 // what this caller's counters have been charged
			for r := range rounds {
				// Amounts no other caller uses: caller i reserves
				// 1000*(i+1)+r and settles at a different amount.
				cost := int64(1000*(i+1) + r)
				actual := cost + int64(r%3-1)*int64(i+1)
				id := fmt.Sprintf("own-%d-%d", i, r)
				if err := cc.Do(ctx(t), "RL.RESERVE", "own", id, 60, "COST", cost, "DESCRIPTOR", "tenant", tenant, "DESCRIPTOR", "user", user).Err(); err != nil {
					errs <- fmt.Sprintf("caller %d: RL.RESERVE %s: %v", i, id, err)
					return
				}
				v, err := cc.Do(ctx(t), "RL.SETTLE", "own", id, actual).Result()
				if err != nil {
					errs <- fmt.Sprintf("caller %d: RL.SETTLE %s: %v", i, id, err)
					return
				}
				used += actual
				row := func(name string) string {
					return fmt.Sprintf("[%s %d %d %d %d]", name, cost, actual, max(cost-actual, 0), max(actual-cost, 0))
				}
				if got, want := fmt.Sprint(v), "["+row("tokens-per-day")+" "+row("per-user")+"]"; got != want {
					errs <- fmt.Sprintf("caller %d: RL.SETTLE %s answered %s, want %s", i, id, got, want)
				}
				// Its own check of the pair: the statuses say what is
				// left of its own counters after one more unit.
				used++
				v, err = cc.Do(ctx(t), "RL.SHOULDRATELIMIT", "own", 1, 1, "-", "-", "-", "tenant", tenant, 1, "-", "-", "-", "user", user).Result()
				if err != nil {
					errs <- fmt.Sprintf("caller %d: RL.SHOULDRATELIMIT: %v", i, err)
					return
				}
				left := strconv.FormatInt(100000000-used, 10)
				want := fmt.Sprintf("[1 [1 100000000 day tokens-per-day %s", left)
				got := fmt.Sprint(v)
				if !strings.HasPrefix(got, want) || !strings.Contains(got, "[1 100000000 day per-user "+left+" ") {
					errs <- fmt.Sprintf("caller %d: RL.SHOULDRATELIMIT answered %s, want statuses of %s and %s at %s left", i, got, tenant, user, left)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	wrong := 0
	for e := range errs {
		if wrong < 10 {
			t.Error(e)
		}
		wrong++
	}
	if wrong > 0 {
		t.Fatalf("%d of %d replies were not their own command's", wrong, callers*rounds*2)
	}
	for g, group := range sc.Groups {
		for j, s := range group {
			if strings.Contains(s.Logs(), "DATA RACE") {
				t.Fatalf("g%dn%d reported a data race:\n%s", g+1, j+1, s.Logs())
			}
		}
	}
}
