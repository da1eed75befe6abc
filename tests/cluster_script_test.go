package tests

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// make cluster's script with two groups, the HTTP and gRPC doors and
// rules: it says where the doors are, each answers, the rules decide; a
// third group added to it (make cluster-add-group) joins and takes slots;
// and stop stops every process.
func TestClusterScriptOpensTheDoors(t *testing.T) {
	base := scriptBase(t, 9)
	dir := t.TempDir() + "/cluster"
	cmd := exec.Command("../scripts/cluster.sh", "start", binary, strconv.Itoa(base), dir)
	cmd.Env = append(cmd.Environ(), "SLUICE_GROUPS=2", "HTTP=1", "GRPC=1", "RULES=../examples/rules")
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() { exec.Command("../scripts/cluster.sh", "stop", dir).Run() })
	if err != nil {
		t.Fatalf("cluster.sh start: %v\n%s", err, out)
	}
	for _, want := range []string{fmt.Sprintf("HTTP:     127.0.0.1 ports %d-%d", base+20000, base+20005),
		fmt.Sprintf("gRPC:     127.0.0.1 ports %d-%d", base+22000, base+22005), "rules:    ../examples/rules"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("cluster.sh does not say %q:\n%s", want, out)
		}
	}
	for i := range 6 {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(base+20000+i) + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("node %d's HTTP door: %v", i+1, err)
		}
		resp.Body.Close()
		c, _ := rlsClient(t, "127.0.0.1:"+strconv.Itoa(base+22000+i))
		// The rules reach each group through its log, soon after its
		// leader is elected: until then the domain is not limited.
		eventually(t, fmt.Sprintf("node %d's gRPC door deciding by the rules", i+1), func() bool {
			r, err := c.ShouldRateLimit(ctx(t), rlsRequest("llm", 0, "tenant=warm"))
			return err == nil && r.Statuses[0].CurrentLimit != nil && r.Statuses[0].CurrentLimit.Name == "tokens-per-minute"
		})
		if _, err := c.ShouldRateLimit(ctx(t), rlsRequest("llm", 1, "tenant=script")); err != nil {
			t.Fatalf("node %d's gRPC door: %v", i+1, err)
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:" + strconv.Itoa(base)}})
	defer cc.Close()
	if v := checkInts(t, cc, "RL.CHECK", "llm", "COST", 0, "DESCRIPTOR", "tenant", "script"); v[2] != 100000-6 {
		t.Fatalf("the six gRPC calls charged %d", 100000-v[2])
	}
	// Run again with more groups on the same data (as a newcomer grows a
	// cluster): refused before any process starts — a map split three
	// ways at the same epoch would give two groups the same slots — with
	// the way to add a group instead.
	again := exec.Command("../scripts/cluster.sh", "start", binary, strconv.Itoa(base), dir)
	again.Env = append(again.Environ(), "SLUICE_GROUPS=3")
	out, err = again.CombinedOutput()
	if code := again.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "CLUSTER ADDGROUP g3") ||
		!strings.Contains(string(out), "--cluster-join 127.0.0.1:"+strconv.Itoa(base)) {
		t.Fatalf("cluster.sh with GROUPS=3 on a cluster of two: exit %d (%v)\n%s", code, err, out)
	}
	if _, err := os.Stat(dir + "/g3n1.pid"); err == nil {
		t.Fatal("cluster.sh started g3 although it refused")
	}
	// What it says to do instead: add a group to the running cluster.
	add := exec.Command("../scripts/cluster.sh", "add-group", binary, strconv.Itoa(base), dir)
	add.Env = append(add.Environ(), "HTTP=1", "GRPC=1")
	if out, err := add.CombinedOutput(); err != nil || !strings.Contains(string(out), "group g3 (127.0.0.1 ports "+strconv.Itoa(base+6)) {
		t.Fatalf("cluster.sh add-group: %v\n%s", err, out)
	}
	g3 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(base+6)})
	defer g3.Close()
	// Slot 0 moves to it, sent to g1's leader, and is then served there.
	moved := false
	for i := range 3 {
		src := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(base+i)})
		if src.Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, 0, "NODE", "g3n1").Err() == nil {
			moved = true
		}
		src.Close()
	}
	if !moved {
		t.Fatal("no member of g1 took CLUSTER MIGRATESLOTS to g3n1")
	}
	g1 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(base)})
	defer g1.Close()
	// slot0InG3 reports whether c's CLUSTER SLOTS places slot 0 on a member
	// of g3.
	slot0InG3 := func(c *redis.Client) bool {
		slots, err := c.ClusterSlots(ctx(t)).Result()
		if err != nil {
			return false
		}
		for _, s := range slots {
			if s.Start == 0 && len(s.Nodes) > 0 {
				port, _ := strconv.Atoi(s.Nodes[0].Addr[strings.LastIndex(s.Nodes[0].Addr, ":")+1:])
				return port >= base+6 && port <= base+8
			}
		}
		return false
	}
	eventually(t, "slot 0 served by g3", func() bool { return slot0InG3(g3) && slot0InG3(g1) })
	// Stopped and started again as it was made (GROUPS=2), the added group
	// comes back from its data directories, slot 0 still its own.
	if out, err := exec.Command("../scripts/cluster.sh", "stop", dir).CombinedOutput(); err != nil {
		t.Fatalf("cluster.sh stop: %v\n%s", err, out)
	}
	restart := exec.Command("../scripts/cluster.sh", "start", binary, strconv.Itoa(base), dir)
	restart.Env = append(restart.Environ(), "SLUICE_GROUPS=2")
	if out, err := restart.CombinedOutput(); err != nil || !strings.Contains(string(out), "of 3 groups of three") {
		t.Fatalf("cluster.sh start again after add-group: %v\n%s", err, out)
	}
	eventually(t, "slot 0 served by g3 after the restart", func() bool {
		cs := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:" + strconv.Itoa(base)}})
		defer cs.Close()
		// "{06S}" is in slot 0.
		return cs.Do(ctx(t), "CL.THROTTLE", "{06S}", 5, 5, 60).Err() == nil && slot0InG3(g1)
	})
	if out, err := exec.Command("../scripts/cluster.sh", "stop", dir).CombinedOutput(); err != nil {
		t.Fatalf("cluster.sh stop: %v\n%s", err, out)
	}
	eventually(t, "every node gone after stop", func() bool {
		for i := range 9 {
			if conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(base+i)); err == nil {
				conn.Close()
				return false
			}
		}
		return true
	})
}

// scriptOffsets are the ports cluster.sh opens for a node on port p: p, its
// Raft port, its HTTP and its gRPC door.
var scriptOffsets = []int{0, 10000, 20000, 22000}

// scriptBase is a first port for n nodes of cluster.sh whose every port is
// free now and below the ephemeral range (the script refuses one inside).
func scriptBase(t *testing.T, n int) int {
	for try := 0; try < 50; try++ {
		b := 2000 + rand.IntN(8000)
		free := true
		for i := range n {
			for _, off := range scriptOffsets {
				ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(b+i+off))
				if err != nil {
					free = false
					break
				}
				ln.Close()
			}
		}
		if free {
			return b
		}
	}
	t.Skip("no free run of ports for the script's fixed offsets")
	return 0
}

// cluster.sh refuses ports whose doors would sit in the ephemeral range,
// and, when a node cannot open its door (the port taken), says which node
// did not come and why, and fails.
func TestClusterScriptNamesTheNodeThatDidNotCome(t *testing.T) {
	dir := t.TempDir() + "/cluster"
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, _ = strconv.Atoi(f[0])
		}
	}
	grpcAt := lo + 100 // node 1's gRPC door, inside the range
	inside := exec.Command("../scripts/cluster.sh", "start", binary, strconv.Itoa(grpcAt-22000), dir)
	inside.Env = append(inside.Environ(), "GRPC=1")
	out, _ := inside.CombinedOutput()
	if code := inside.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), strconv.Itoa(grpcAt)+", inside the ephemeral range") {
		t.Fatalf("a gRPC door at %d: exit %d\n%s", grpcAt, code, out)
	}
	if _, err := os.Stat(dir + "/n1.pid"); err == nil {
		t.Fatal("cluster.sh started a node although it refused the ports")
	}
	base := scriptBase(t, 3)
	taken, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+1+22000))
	if err != nil {
		t.Skip(err)
	}
	defer taken.Close()
	cmd := exec.Command("../scripts/cluster.sh", "start", binary, strconv.Itoa(base), dir)
	cmd.Env = append(cmd.Environ(), "GRPC=1")
	out, _ = cmd.CombinedOutput()
	t.Cleanup(func() { exec.Command("../scripts/cluster.sh", "stop", dir).Run() })
	want := fmt.Sprintf("n2 (127.0.0.1:%d) exited: ", base+1)
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), want) ||
		!strings.Contains(string(out), "address already in use") || strings.Contains(string(out), "runs on") {
		t.Fatalf("node 2's gRPC door taken: exit %d, want 1 naming %q\n%s", code, want, out)
	}
}
