package tests

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// startShardedWithStatus is a 2×3 sharded cluster whose first member
// serves the HTTP door; a migration of g1's slots 0-99 to g2 has run.
func startShardedWithStatus(t *testing.T) (*ShardedCluster, string) {
	t.Helper()
	httpAddr := freeAddr(t)
	sc := StartShardedClusterWith(t, 3, [][]string{{"0-8191"}, {"8192-16383"}}, func(g, j int) []string {
		if g == 0 && j == 0 {
			return []string{"--http-addr", httpAddr}
		}
		return nil
	})
	node, err := sc.Groups[1][0].Client().Do(ctx(t), "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "MIGRATESLOTS", func() bool {
		return sc.Leader(t, 0).Client().Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, 99, "NODE", node).Err() == nil
	})
	migrationEnded(t, func() *redis.Client { return sc.Leader(t, 0).Client() })
	return sc, httpAddr
}

// The status page of a sharded cluster's member says every group's
// leader by id and address, and lists the migrations that ran (slots,
// how many moved, state).
func TestStatusJSONSharded(t *testing.T) {
	sc, httpAddr := startShardedWithStatus(t)
	leader2 := sc.Leader(t, 1)
	var st map[string]any
	eventually(t, "the status lists the migration and g2's leader by id", func() bool {
		st = getStatus(t, httpAddr)
		groups, _ := st["groups"].([]any)
		migrations, _ := st["migrations"].([]any)
		if len(groups) != 2 || len(migrations) == 0 {
			return false
		}
		g2 := groups[1].(map[string]any)
		m := migrations[0].(map[string]any)
		return strings.HasSuffix(fmt.Sprint(g2["leader"]), " "+leader2.Addr) && strings.HasPrefix(fmt.Sprint(g2["leader"]), "g2n") &&
			m["from"] == "g1" && m["to"] == "g2" && m["slots"] == "0-99" && m["slots_moved"] == float64(100) && m["state"] == "success"
	})
}

// The same page in Chromium, at 1400 px: nothing that must not wrap
// breaks, the migration shows.
func TestStatusPageShardedInChromium(t *testing.T) {
	if os.Getenv("SLUICE_CHECK_DASHBOARDS") == "" {
		t.Skip("SLUICE_CHECK_DASHBOARDS is not set (scripts/check_dashboards.sh sets it)")
	}
	_, httpAddr := startShardedWithStatus(t)
	eventually(t, "the migration in the status", func() bool {
		m, _ := getStatus(t, httpAddr)["migrations"].([]any)
		return len(m) > 0
	})
	dom, console := chromium(t, "http://"+httpAddr+"/", "--virtual-time-budget=3000", "--dump-dom")
	if len(console) > 0 {
		t.Fatalf("the page wrote to the console:\n%s", strings.Join(console, "\n"))
	}
	for _, want := range []string{"Slot migrations", "100 of 100", "success"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	if broken := brokenCells(t, httpAddr); broken != "[]" {
		t.Errorf("cells broken across lines at 1400 px: %s", broken)
	}
}
