package tests

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// nodeInfo reads one field of a node's INFO section.
func nodeInfo(t *testing.T, s *Server, section, field string) string {
	t.Helper()
	return infoField(t, s.Client(), section, field)
}

// A dead member is reported as dead: after SIGKILL of a follower, the
// leader's INFO replication, ROLE, CLUSTER NODES, RAFT INFO and metrics
// say so; after a failover the new leader reports the old one dead.
func TestDeadMemberIsReportedOffline(t *testing.T) {
	metrics := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cl := StartCluster(t, 3, func(i int, _ []string) []string { return []string{"--http-addr", metrics[i]} })
	leader := cl.Leader()
	eventually(t, "two connected replicas", func() bool { return nodeInfo(t, leader, "replication", "connected_slaves") == "2" })
	if v := nodeInfo(t, leader, "replication", "slave0"); !strings.Contains(v, "state=online") {
		t.Fatalf("slave0 %q", v)
	}
	dead := cl.Followers(leader)[0]
	dead.Kill()
	eventually(t, "one connected replica", func() bool { return nodeInfo(t, leader, "replication", "connected_slaves") == "1" })
	// Redis lists connected replicas only: connected_slaves counts the
	// slaveN lines.
	replication, _ := leader.Client().Info(ctx(t), "replication").Result()
	if !strings.Contains(replication, "slave0:") || strings.Contains(replication, "slave1:") || strings.Contains(replication, "port="+portOf(dead.Addr)+",") {
		t.Fatalf("INFO replication lists the dead replica, or not the live one:\n%s", replication)
	}
	role, err := leader.Client().Do(ctx(t), "ROLE").Slice()
	if err != nil || len(role[2].([]any)) != 1 {
		t.Fatalf("ROLE lists %v, want the one live replica", role)
	}
	nodes, _ := leader.Client().Do(ctx(t), "CLUSTER", "NODES").Text()
	var deadLine string
	for _, l := range strings.Split(nodes, "\n") {
		if strings.Contains(l, dead.Addr) {
			deadLine = l
		}
	}
	if !strings.Contains(deadLine, "fail") || !strings.Contains(deadLine, "disconnected") {
		t.Fatalf("CLUSTER NODES line of the dead member: %q\n%s", deadLine, nodes)
	}
	raft, _ := leader.Client().Do(ctx(t), "RAFT", "INFO").Slice()
	if !strings.Contains(strings.Join(strings.Fields(strings.ReplaceAll(fmtAny(raft), "\n", " ")), " "), "offline last_contact_ms=") {
		t.Fatalf("RAFT INFO: %v", raft)
	}
	resp, err := http.Get("http://" + metrics[indexOf(cl, leader)] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	deadID := "n" + string(rune('1'+indexOf(cl, dead)))
	if !strings.Contains(string(body), `sluice_raft_peer_online{peer="`+deadID+`"} 0`) ||
		!strings.Contains(string(body), `sluice_raft_peer_match_index{peer="`) {
		t.Fatalf("metrics lack the dead member %s offline", deadID)
	}

	// The leader dies too once the dead follower is back: the new leader
	// reports the old one offline.
	dead.Start()
	eventually(t, "two connected replicas again", func() bool { return nodeInfo(t, leader, "replication", "connected_slaves") == "2" })
	old := leader
	old.Kill()
	leader = cl.Leader()
	eventually(t, "the old leader reported offline", func() bool {
		return nodeInfo(t, leader, "replication", "connected_slaves") == "1"
	})
	replication, _ = leader.Client().Info(ctx(t), "replication").Result()
	if strings.Contains(replication, "port="+portOf(old.Addr)+",") {
		t.Fatalf("the new leader's INFO replication lists the old leader:\n%s", replication)
	}
}

func portOf(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

func fmtAny(v []any) string {
	var b strings.Builder
	for _, x := range v {
		switch y := x.(type) {
		case []any:
			b.WriteString(fmtAny(y))
		case string:
			b.WriteString(y + "\n")
		}
	}
	return b.String()
}
