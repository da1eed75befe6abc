package tests

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Three processes each host a member of each of three groups, every
// process on one Raft port (the groups multiplexed over it) with a client
// port per member: the groups elect, a ClusterClient routes to all three,
// redis-cli --cluster check sees three masters with two replicas each;
// RAFT TRANSFER gives each process one group to lead; with a process
// killed, every group still leads and answers.
func TestGroupsShareOneRaftPort(t *testing.T) {
	const n = 3
	raft := make([]string, n)
	client := [n][n]string{} // client[g][p]: group g's member in process p
	for p := range n {
		raft[p] = freeAddr(t)
		for g := range n {
			client[g][p] = freeAddr(t)
		}
	}
	var b strings.Builder
	b.WriteString("epoch: 1\ngroups:\n")
	for g := range n {
		var members []string
		for p := range n {
			members = append(members, fmt.Sprintf("g%dn%d: %q", g+1, p+1, client[g][p]+"@"+raft[p]))
		}
		fmt.Fprintf(&b, "  - id: g%d\n    slots: [\"%d-%d\"]\n    members: {%s}\n", g+1, g*16384/n, (g+1)*16384/n-1, strings.Join(members, ", "))
	}
	mapPath := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(mapPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The shared Raft port proves membership too (--cluster-secret-file).
	secret := writeSecret(t, "the hosted groups' shared secret")
	procs := make([]*Server, n)
	for p := range n {
		s := &Server{t: t, Addr: client[0][p], DataDir: t.TempDir()}
		s.Args = []string{"--enable-debug-command", "--data-dir", s.DataDir, "--cluster-map", mapPath,
			"--node-id", fmt.Sprintf("g1n%d,g2n%d,g3n%d", p+1, p+1, p+1), "--cluster-secret-file", secret}
		s.Start()
		t.Cleanup(s.Kill)
		procs[p] = s
	}
	clients := map[string]*redis.Client{}
	c := func(addr string) *redis.Client {
		if clients[addr] == nil {
			clients[addr] = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
			t.Cleanup(func() { clients[addr].Close() })
		}
		return clients[addr]
	}
	alive := func(p int) bool { return procs[p].cmd != nil }
	// leaderOf is the process whose member leads group g (-1: none).
	leaderOf := func(g int) int {
		found := -1
		for p := range n {
			if !alive(p) {
				continue
			}
			if v, err := c(client[g][p]).Do(ctx(t), "ROLE").Slice(); err == nil && len(v) > 0 && v[0] == "master" {
				if found >= 0 {
					return -1
				}
				found = p
			}
		}
		return found
	}
	eventually(t, "every group leads", func() bool {
		for g := range n {
			if leaderOf(g) < 0 {
				return false
			}
		}
		return true
	})
	// Process p leads group p.
	for g := range n {
		eventually(t, fmt.Sprintf("process %d leads group %d", g+1, g+1), func() bool {
			l := leaderOf(g)
			if l == g {
				return true
			}
			if l >= 0 {
				c(client[g][l]).Do(ctx(t), "RAFT", "TRANSFER", fmt.Sprintf("g%dn%d", g+1, g+1))
			}
			return false
		})
	}
	var addrs []string
	for g := range n {
		addrs = append(addrs, client[g][:]...)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16})
	t.Cleanup(func() { cc.Close() })
	groupsHit := map[int]bool{}
	eventually(t, "a ClusterClient reaches every group", func() bool {
		for i := range 60 {
			k := "h" + strconv.Itoa(i)
			v, err := cc.Do(ctx(t), "CL.THROTTLE", k, 5, 10, 60).Slice()
			if err != nil || v[0] != int64(0) {
				return false
			}
			s, _ := cc.ClusterKeySlot(ctx(t), k).Result()
			groupsHit[int(s)*n/16384] = true
		}
		return len(groupsHit) == n
	})
	var out []byte
	eventuallyExplained(t, "redis-cli --cluster check: three masters, two replicas each", func() bool {
		host, port, _ := net.SplitHostPort(client[0][0])
		out, _ = exec.Command("redis-cli", "-h", host, "-p", port, "--cluster", "check", client[0][0]).CombinedOutput()
		return strings.Contains(string(out), "[OK] All 16384 slots covered.") && !strings.Contains(string(out), "[ERR]") &&
			len(regexp.MustCompile(`M: [0-9a-f]{40} `).FindAll(out, -1)) == n && strings.Count(string(out), "2 additional replica(s)") == n
	}, func() string { return string(out) })
	// One process down: the other two still lead every group between them.
	procs[0].Kill()
	eventually(t, "every group leads without process 1", func() bool {
		for g := range n {
			if l := leaderOf(g); l < 1 {
				return false
			}
		}
		cc.ReloadState(ctx(t))
		for i := range 60 {
			if cc.Do(ctx(t), "CL.THROTTLE", "h"+strconv.Itoa(i), 5, 10, 60).Err() != nil {
				return false
			}
		}
		return true
	})
}
