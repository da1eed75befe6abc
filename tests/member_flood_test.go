package tests

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// peersGroupID is the group id a --peers member's port knows its group by.
const peersGroupID = "sluice"

// A flood of the member port — 10,000 connections that send only the
// purpose header, without the cluster's secret and with it — holds no
// more than its cap of descriptors (far fewer than the flood), and leaves
// the client door serving: a new client is answered, the group still
// decides, the log says so in a line or two, not a line a connection, and
// the metrics count the refusals.
func TestMemberPortFloodLeavesTheDoorsServing(t *testing.T) {
	for _, withSecret := range []bool{false, true} {
		t.Run(fmt.Sprintf("secret=%v", withSecret), func(t *testing.T) {
			extra := []string{"--member-max-conns", "512"}
			if withSecret {
				extra = append(extra, "--cluster-secret-file", writeSecret(t, "a cluster secret of some length"))
			}
			httpAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
			cl := StartCluster(t, 3, func(i int, _ []string) []string { return []string{"--http-addr", httpAddrs[i]} }, extra...)
			leader := cl.Leader()
			target := 0
			for i, s := range cl.Nodes {
				if s != leader {
					target = i
					break
				}
			}
			follower := cl.Nodes[target]
			// The member-call header of the group's own id: what a
			// member sends first.
			header := append([]byte{0, byte(len(peersGroupID))}, peersGroupID...)
			var flood []net.Conn
			defer func() {
				for _, c := range flood {
					c.Close()
				}
			}()
			for range 10000 {
				c, err := net.Dial("tcp", cl.RaftAddrs[target])
				if err != nil {
					t.Fatalf("dial %d: %v", len(flood), err)
				}
				c.Write(header)
				flood = append(flood, c)
			}
			fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", follower.cmd.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			if len(fds) > 2000 {
				t.Fatalf("the follower holds %d descriptors under a flood of 10,000 header-only connections (cap 512)", len(fds))
			}
			c := follower.Client()
			if err := c.Ping(ctx(t)).Err(); err != nil {
				t.Fatalf("the follower's RESP door under the flood: %v", err)
			}
			lc := leader.Client()
			if v := ints(t, lc.Do(ctx(t), "CL.THROTTLE", "flood", 5, 5, 60)); v[0] != 0 {
				t.Fatalf("the group under the flood: %v", v)
			}
			if n := strings.Count(follower.Logs(), "member port connections refused"); n > 3 {
				t.Fatalf("%d log lines for the flood:\n%s", n, follower.Logs())
			}
			// The operator sees it in the metrics.
			m := httpGet(t, "http://"+httpAddrs[target]+"/metrics").body
			if !strings.Contains(m, `sluice_member_port_refused_total{reason="over_max_pending"}`) ||
				strings.Contains(m, `sluice_member_port_refused_total{reason="over_max_pending"} 0`) {
				t.Fatalf("the flood's refusals are not in the metrics:\n%s", grepLines(m, "sluice_member_port"))
			}
		})
	}
}

// Connections that reach Raft make its transport allocate a 260 KB buffer
// each: heap that is the network's, not the keyspace's. 2,000 of them
// leave used_memory (what maxmemory is compared with) where it was, and
// a new key is not refused -OOM.
func TestRaftBuffersAreNotUsedMemory(t *testing.T) {
	cl := StartCluster(t, 1, nil, "--maxmemory", "100mb")
	s := cl.Nodes[0]
	c := s.Client()
	used := func() int64 {
		if err := c.Do(ctx(t), "DEBUG", "GC").Err(); err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(infoField(t, c, "memory", "used_memory"), 10, 64)
		return n
	}
	before := used()
	header := append([]byte{byte(len(peersGroupID))}, peersGroupID...) // Raft's
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// In batches of 200, each taken by Raft before the next is dialled:
	// the port holds at most 256 connections pending (raftmux), and on a
	// busy machine 2,000 at once would be refused past them.
	for batch := range 10 {
		for range 200 {
			nc, err := net.Dial("tcp", cl.RaftAddrs[0])
			if err != nil {
				t.Fatal(err)
			}
			nc.Write(append(header, 0)) // and an RPC's first byte: Raft reads on
			conns = append(conns, nc)
		}
		// The buffers are there once Raft took the connections: the heap
		// grew by most of 200 × 260 KB a batch.
		eventually(t, "Raft holding the connections' buffers", func() bool {
			var m runtimeHeap
			return m.read(t, c) > before+int64(batch+1)*40<<20
		})
	}
	if after := used(); after > before+50<<20 {
		t.Fatalf("used_memory went from %d to %d with 2,000 Raft connections open", before, after)
	}
	if err := c.Do(ctx(t), "CL.THROTTLE", "new-key", 5, 5, 60).Err(); err != nil {
		t.Fatalf("a new key with 2,000 Raft connections open: %v", err)
	}
}

// runtimeHeap reads used_memory_heap_allocated: every allocated heap
// byte, the transports' buffers included.
type runtimeHeap struct{}

func (runtimeHeap) read(t *testing.T, c *redis.Client) int64 {
	n, _ := strconv.ParseInt(infoField(t, c, "memory", "used_memory_heap_allocated"), 10, 64)
	return n
}
