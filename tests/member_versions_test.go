package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/slot"
)

// A sharded cluster halfway through an upgrade: group 1 runs this build,
// group 2 the previous release (0.4.0), which speaks the member port's
// Apply — RESP words in, a RESP reply out — where this build sends typed
// placement requests. Every placement crosses both ways in the form its
// receiver reads: configuration set in either group reaches the other; the
// groups' rules are compared (this build asks 0.4.0 for its digest); slots
// move from this build to 0.4.0 (an import sent as Apply) and back (0.4.0's
// Apply served). Built from the repository's history like the
// rolling-upgrade scenario, so it runs with make robustness.
func TestPlacementAcrossVersions(t *testing.T) {
	if os.Getenv("SLUICE_ROBUSTNESS") == "" {
		t.Skip("builds the previous release: make robustness runs it")
	}
	previous := previousRelease(t, false)
	// A domain in each group's slots (the command's group applies it
	// first, then sends it to the other).
	var in [2]string
	for i := 0; in[0] == "" || in[1] == ""; i++ {
		d := fmt.Sprintf("d%d", i)
		if g := slot.Of([]byte(d)) / 8192; in[g] == "" {
			in[g] = d
		}
	}
	dir := t.TempDir()
	for _, d := range in {
		if err := os.WriteFile(filepath.Join(dir, d+".yaml"), []byte(strings.Replace(crossRules, "domain: x", "domain: "+d, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sc := startShardedOf(t, 1, 3, [][]string{{"0-8191"}, {"8192-16383"}}, nil, func(g, _ int) string {
		if g == 1 {
			return previous
		}
		return ""
	}, nil, "--rules", dir)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })

	// Each group knows the other's leader once it has asked (Report, which
	// 0.4.0 serves): RL.RULES LIST compares every group's digest, so it
	// answers then, and says the rules agree.
	for _, d := range in {
		eventually(t, "RL.RULES LIST "+d+" compares both groups", func() bool {
			v, err := cc.Do(ctx(t), "RL.RULES", "LIST", d).Slice()
			return err == nil && len(v) > 0
		})
	}
	// Configuration set in either group is applied in both (else its
	// reply says which group did not take it).
	for g, d := range in {
		if err := cc.Do(ctx(t), "RL.OVERRIDE", "SET", d, 50, "day", "DESCRIPTOR", "user", "vip").Err(); err != nil {
			t.Fatalf("an override set in group %d (its domain %s): %v", g+1, d, err)
		}
		// RL.RULES LIST compares every group's digest: the same rules.
		if v, err := cc.Do(ctx(t), "RL.RULES", "LIST", d).Slice(); err != nil || len(v) == 0 {
			t.Fatalf("RL.RULES LIST %s in group %d: %v %v", d, g+1, v, err)
		}
	}
	// A check across both groups decides in both (a part each way).
	args := []any{"RL.CHECK", in[0], "DESCRIPTOR", "endpoint", "e"}
	for i := range 8 {
		args = append(args, "DESCRIPTOR", "user", fmt.Sprintf("u%d", i))
	}
	if err := cc.Do(ctx(t), args...).Err(); err != nil {
		t.Fatalf("a check across the groups: %v", err)
	}
	// Slots move from this build to 0.4.0, and back.
	move := func(from, to int, lo, hi int) {
		t.Helper()
		node, err := sc.Groups[to][0].Client().Do(ctx(t), "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.Leader(t, from).Client().Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", lo, hi, "NODE", node).Err(); err != nil {
			t.Fatalf("MIGRATESLOTS %d-%d from group %d: %v", lo, hi, from+1, err)
		}
		migrationEnded(t, func() *redis.Client { return sc.Leader(t, from).Client() })
	}
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("k%d", i); slot.Of([]byte(k)) < 64 {
			key = k
		}
	}
	if err := cc.Do(ctx(t), "CL.THROTTLE", key, 9, 1, 86400, 1).Err(); err != nil {
		t.Fatal(err)
	}
	move(0, 1, 0, 63)
	move(1, 0, 0, 63)
	v, err := cc.Do(ctx(t), "CL.THROTTLE", key, 9, 1, 86400, 0).Slice()
	if err != nil || v[2] != int64(9) {
		t.Fatalf("%s after moving to 0.4.0 and back: %v %v (one unit charged of ten)", key, v, err)
	}
}
