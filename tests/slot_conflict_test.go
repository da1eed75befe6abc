package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/slot"
)

// Two groups given the same slots at one epoch, by hand: a running
// cluster of two groups, and a third group started with a map that splits
// the slots three ways at the same epoch (what running make cluster
// GROUPS=3 on a cluster of two did). The third group learns that the
// second claims its slots at that epoch and decides for none of them:
// CLUSTERDOWN naming the conflict, INFO and CLUSTER INFO say so, and
// redis-cli --cluster check fails. A key of the overlap is admitted only
// as often as its limit allows, whichever member a client starts from.
// A member of the second group restarted with the three-way map is
// refused at start.
func TestSlotsClaimedTwiceAtOneEpoch(t *testing.T) {
	sc := StartShardedCluster(t, 1, [][]string{{"0-8191"}, {"8192-16383"}})
	g1, g2 := sc.Groups[0][0], sc.Groups[1][0]
	g3 := &Server{t: t, Addr: freeAddr(t), DataDir: t.TempDir()}
	g3Raft := freeAddr(t)
	threeWays := filepath.Join(t.TempDir(), "cluster.yaml")
	mapText := fmt.Sprintf(`epoch: 1
groups:
  - id: g1
    slots: ["0-5460"]
    members: {g1n1: "%s@%s"}
  - id: g2
    slots: ["5461-10922"]
    members: {g2n1: "%s@%s"}
  - id: g3
    slots: ["10923-16383"]
    members: {g3n1: "%s@%s"}
`, g1.Addr, sc.RaftAddrs[0][0], g2.Addr, sc.RaftAddrs[1][0], g3.Addr, g3Raft)
	if err := os.WriteFile(threeWays, []byte(mapText), 0o644); err != nil {
		t.Fatal(err)
	}
	g3.Args = []string{"--enable-debug-command", "--data-dir", g3.DataDir, "--node-id", "g3n1", "--cluster-map", threeWays}
	g3.Start()
	t.Cleanup(g3.Kill)
	c3 := g3.Client()
	// g3's log takes its slots (the state in which it could decide for
	// them), and it learns that g2 claims them too.
	eventually(t, "g3 owning its slots and seeing g2's claim of them", func() bool {
		info, _ := c3.Info(ctx(t), "cluster").Result()
		return strings.Contains(info, "sluice_slots:10923-16383\r\n") &&
			strings.Contains(info, "sluice_slot_conflicts:10923-16383=g2,g3@1\r\n")
	})
	// A key of the overlap.
	key := ""
	for i := 0; key == ""; i++ {
		if k := "user" + strconv.Itoa(i); slot.Of([]byte(k)) >= 10923 {
			key = k
		}
	}
	err := c3.Do(ctx(t), "CL.THROTTLE", key, 2, 1, 60).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN slots 10923-16383 are claimed by groups g2 and g3 at epoch 1") {
		t.Fatalf("g3 asked for a key of slot %d: %v", slot.Of([]byte(key)), err)
	}
	if v, _ := c3.ClusterInfo(ctx(t)).Result(); !strings.Contains(v, "cluster_state:fail") {
		t.Fatalf("g3's CLUSTER INFO:\n%s", v)
	}
	out, err := exec.Command("redis-cli", "--cluster", "check", g3.Addr).CombinedOutput()
	// g3 shows the slots as no one's, g2 (whose map has no g3) as its own:
	// the members disagree, and the check says so.
	if err == nil || !strings.Contains(string(out), "[ERR] Nodes don't agree about configuration") {
		t.Fatalf("redis-cli --cluster check %s passed (%v):\n%s", g3.Addr, err, out)
	}
	// Clients starting from either side: the key's burst of 3 is all
	// that is admitted (g2 decides; g3 refuses).
	admitted := 0
	for _, seed := range []string{g1.Addr, g3.Addr} {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{seed}, MaxRedirects: 4})
		for range 6 {
			if v, err := cc.Do(ctx(t), "CL.THROTTLE", key, 2, 1, 60).Int64Slice(); err == nil && v[0] == 0 {
				admitted++
			}
		}
		cc.Close()
	}
	if admitted != 3 {
		t.Fatalf("%d of 12 admitted for a key whose burst is 3", admitted)
	}
	// g2's member restarted with the three-way map: refused, as its data
	// directory started with another split at epoch 1.
	g2.Stop()
	out2, err := startMustFail(t, "--data-dir", g2.DataDir, "--node-id", "g2n1", "--cluster-map", threeWays, "--addr", g2.Addr)
	if err == nil || !strings.Contains(out2, "gives the slots to the groups otherwise than the map") {
		t.Fatalf("g2n1 restarted with a map split otherwise at its epoch: %v\n%s", err, out2)
	}
	g2.Start()
	eventually(t, "g2 serving again with its own map", func() bool {
		return g2.Client().Do(ctx(t), "CL.THROTTLE", "{"+key+"}probe", 2, 1, 60).Err() == nil
	})
}

// A data directory knows whose state it holds: started as a single node,
// as another member, or as a member of a group of other members, it is
// refused with what to start it as; a map with an unknown field, and an
// --addr that is not the map's for the member, are refused too.
func TestDataDirectoryKnowsItsCluster(t *testing.T) {
	sc := StartShardedCluster(t, 1, [][]string{{"0-8191"}, {"8192-16383"}})
	g1 := sc.Groups[0][0]
	g1.Stop()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr", freeAddr(t)}, "holds the state of member g1n1 of group g1 of a sharded cluster, not of a single node; start it as that (--node-id g1n1"},
		{[]string{"--addr", sc.Groups[1][0].Addr, "--node-id", "g2n1", "--cluster-map", sc.MapPath}, "not of node g2n1"},
		{[]string{"--addr", g1.Addr, "--node-id", "g1n1", "--peers", "g1n1=" + g1.Addr + ",x=" + freeAddr(t)}, "not of member g1n1 of a replicated group"},
	} {
		out, err := startMustFail(t, append([]string{"--data-dir", g1.DataDir}, c.args...)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("g1n1's data directory started with %v: %v\n%s", c.args, err, out)
		}
	}
	// Not a stray file: the member starts again on it.
	g1.Start()
	sc.Leader(t, 0)

	// A map whose group says slot: (not slots:) is refused, by name.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	text, _ := os.ReadFile(sc.MapPath)
	os.WriteFile(bad, []byte(strings.Replace(string(text), "slots:", "slot:", 1)), 0o644)
	out, err := startMustFail(t, "--data-dir", t.TempDir(), "--node-id", "g1n1", "--cluster-map", bad, "--addr", freeAddr(t))
	if err == nil || !strings.Contains(out, "field slot not found") {
		t.Errorf("a map with slot: for slots: %v\n%s", err, out)
	}
	// An --addr on another port than the map gives the member.
	out, err = startMustFail(t, "--data-dir", t.TempDir(), "--node-id", "g2n1", "--cluster-map", sc.MapPath, "--addr", freeAddr(t))
	if err == nil || !strings.Contains(out, "is not member g2n1's client address "+sc.Groups[1][0].Addr) {
		t.Errorf("a member on another --addr than its map's: %v\n%s", err, out)
	}
}
