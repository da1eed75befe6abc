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
// rules: it says where the doors are, each answers, the rules decide, and
// stop stops every process.
func TestClusterScriptOpensTheDoors(t *testing.T) {
	base := 0
	for try := 0; base == 0 && try < 50; try++ {
		b := 20000 + rand.IntN(10000)
		free := true
		for i := range 6 {
			for _, off := range []int{0, 10000, 20000, 30000} {
				ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(b+i+off))
				if err != nil {
					free = false
					break
				}
				ln.Close()
			}
		}
		if free {
			base = b
		}
	}
	if base == 0 {
		t.Skip("no free run of ports for the script's fixed offsets")
	}
	dir := t.TempDir() + "/cluster"
	cmd := exec.Command("../scripts/cluster.sh", "start", binary, strconv.Itoa(base), dir)
	cmd.Env = append(cmd.Environ(), "SLUICE_GROUPS=2", "HTTP=1", "GRPC=1", "RULES=../examples/rules")
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() { exec.Command("../scripts/cluster.sh", "stop", dir).Run() })
	if err != nil {
		t.Fatalf("cluster.sh start: %v\n%s", err, out)
	}
	for _, want := range []string{fmt.Sprintf("HTTP:     127.0.0.1 ports %d-%d", base+20000, base+20005),
		fmt.Sprintf("gRPC:     127.0.0.1 ports %d-%d", base+30000, base+30005), "rules:    ../examples/rules"} {
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
		c, _ := rlsClient(t, "127.0.0.1:"+strconv.Itoa(base+30000+i))
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
	if out, err := exec.Command("../scripts/cluster.sh", "stop", dir).CombinedOutput(); err != nil {
		t.Fatalf("cluster.sh stop: %v\n%s", err, out)
	}
	eventually(t, "every node gone after stop", func() bool {
		for i := range 6 {
			if conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(base+i)); err == nil {
				conn.Close()
				return false
			}
		}
		return true
	})
}
