package tests

import (
	"fmt"
	"strings"
	"testing"
)

// Members whose Raft addresses are names that do not resolve where they
// start (a Kubernetes pod's DNS name before its record exists; here names
// under .invalid, which never resolve) listen on --raft-listen-addr and
// still form a group and fail over: nothing resolves the map's names at
// start, and others reach them where --raft-dial-via says.
func TestRaftListenAddrLeavesTheMapsNamesUnresolved(t *testing.T) {
	c := NewCluster(t, 3)
	var peers, via []string
	for i, s := range c.Nodes {
		_, port, _ := strings.Cut(c.RaftAddrs[i], ":")
		peers = append(peers, fmt.Sprintf("n%d=%s@n%d.sluice.invalid:%s", i+1, s.Addr, i+1, port))
		via = append(via, fmt.Sprintf("n%d=%s", i+1, c.RaftAddrs[i]))
	}
	c.Peers = strings.Join(peers, ",")
	c.Start(func(i int, raftAddrs []string) []string {
		return []string{"--raft-listen-addr", raftAddrs[i], "--raft-dial-via", strings.Join(via, ",")}
	})
	leader := c.Leader()
	if err := leader.Client().Do(ctx(t), "CL.THROTTLE", "named", "5", "10", "60").Err(); err != nil {
		t.Fatal(err)
	}
	raft, err := leader.Client().Do(ctx(t), "RAFT", "INFO").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if info := fmtAny(raft); !strings.Contains(info, "n2.sluice.invalid:") {
		t.Fatalf("RAFT INFO does not name the members as the map does:\n%s", info)
	}
	leader.Kill()
	next := c.Leader()
	if next == leader {
		t.Fatal("no failover")
	}
	if err := next.Client().Do(ctx(t), "CL.THROTTLE", "named", "5", "10", "60").Err(); err != nil {
		t.Fatalf("after the failover: %v\n%s", err, c.Logs())
	}
}
