package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// memberView is what one node's every topology reply says of another
// member, found by its client address.
type memberView struct {
	nodesLine  string // its CLUSTER NODES line
	inSlots    bool   // listed in CLUSTER SLOTS
	shards     string // its CLUSTER SHARDS health
	raftHealth string // online, offline or unknown in RAFT INFO
	metric     string // its sluice_raft_peer_online sample ("" when absent)
	status     string // its /status.json state
}

func viewOf(t *testing.T, s *Server, httpAddr, id, addr string) memberView {
	t.Helper()
	c := s.Client()
	var v memberView
	nodes, _ := c.Do(ctx(t), "CLUSTER", "NODES").Text()
	for _, l := range strings.Split(nodes, "\n") {
		if strings.Contains(l, " "+addr+"@") {
			v.nodesLine = l
		}
	}
	slots, _ := c.ClusterSlots(ctx(t)).Result()
	for _, r := range slots {
		for _, n := range r.Nodes {
			if n.Addr == addr {
				v.inSlots = true
			}
		}
	}
	shards, _ := c.ClusterShards(ctx(t)).Result()
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.IP+":"+strconv.FormatInt(n.Port, 10) == addr {
				v.shards = n.Health
			}
		}
	}
	info, _ := c.Do(ctx(t), "RAFT", "INFO").Slice()
	for _, l := range strings.Split(fmtAny(info), "\n") {
		if f := strings.Fields(l); len(f) >= 5 && f[0] == id {
			v.raftHealth = f[4]
		}
	}
	body := httpGet(t, "http://"+httpAddr+"/metrics").body
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, `sluice_raft_peer_online{peer="`+id+`"} `) {
			v.metric = strings.Fields(l)[1]
		}
	}
	var st struct {
		Members []struct{ ID, State string }
	}
	json.Unmarshal([]byte(httpGet(t, "http://"+httpAddr+"/status.json").body), &st)
	for _, m := range st.Members {
		if m.ID == id {
			v.status = m.State
		}
	}
	return v
}

func (v memberView) live() bool {
	f := strings.Fields(v.nodesLine)
	return len(f) >= 8 && !strings.Contains(f[2], "fail") && f[7] == "connected" && v.inSlots && v.shards == "online" &&
		v.raftHealth == "online" && v.metric == "1" && v.status == "online"
}

func (v memberView) failed() bool {
	return strings.Contains(v.nodesLine, ",fail") && !v.inSlots && v.shards == "failed" &&
		v.raftHealth == "offline" && v.metric == "0" && v.status == "offline"
}

// A follower reports its live siblings live — in CLUSTER NODES, SLOTS and
// SHARDS, RAFT INFO, the metrics and the status page — as the leader
// knows them, and a dead one failed once the leader does; redis-cli's
// cluster check through a follower counts every live replica.
func TestFollowersReportLiveSiblingsLive(t *testing.T) {
	httpAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cl := StartCluster(t, 3, func(i int, _ []string) []string { return []string{"--http-addr", httpAddrs[i]} })
	leader := cl.Leader()
	followers := cl.Followers(leader)
	idOf := func(s *Server) string { return "n" + strconv.Itoa(indexOf(cl, s)+1) }
	// A member's node id is what its data directory keeps.
	for _, n := range cl.Nodes {
		id, _ := n.Client().Do(ctx(t), "CLUSTER", "MYID").Text()
		file, err := os.ReadFile(filepath.Join(n.DataDir, "node-id"))
		if err != nil || strings.TrimSpace(string(file)) != id {
			t.Fatalf("%s: CLUSTER MYID %s, <data-dir>/node-id %q (%v)", idOf(n), id, file, err)
		}
	}
	for _, f := range followers {
		for _, other := range cl.Nodes {
			if other == f {
				continue
			}
			var v memberView
			eventuallyExplained(t, idOf(f)+" reports "+idOf(other)+" live", func() bool {
				v = viewOf(t, f, httpAddrs[indexOf(cl, f)], idOf(other), other.Addr)
				return v.live()
			}, func() string { return strings.ReplaceAll(fmtView(v), "\n", " ") })
		}
		// Its status page gives the leader's index as the leader's note
		// says it, and how far behind each member is against it.
		var st struct {
			Members []struct {
				ID         string
				Role       string
				MatchIndex uint64  `json:"match_index"`
				Behind     *uint64 `json:"entries_behind"`
			}
		}
		var page string
		eventuallyExplained(t, idOf(f)+"'s status page gives the leader's index and every member's lag", func() bool {
			page = httpGet(t, "http://"+httpAddrs[indexOf(cl, f)]+"/status.json").body
			st.Members = nil
			if json.Unmarshal([]byte(page), &st) != nil || len(st.Members) != 3 {
				return false
			}
			for _, m := range st.Members {
				if (m.Role == "leader" && m.MatchIndex == 0) || (m.Role != "leader" && m.Behind == nil) {
					return false
				}
			}
			return true
		}, func() string { return page })
		check := redisCLI(t, f.Addr, "--cluster", "check", f.Addr)
		if !strings.Contains(check, "2 additional replica(s)") || strings.Contains(check, "[ERR]") {
			t.Fatalf("redis-cli --cluster check through follower %s:\n%s", idOf(f), check)
		}
	}
	dead, witness := followers[0], followers[1]
	dead.Kill()
	var v memberView
	eventuallyExplained(t, idOf(witness)+" reports the dead "+idOf(dead)+" failed", func() bool {
		v = viewOf(t, witness, httpAddrs[indexOf(cl, witness)], idOf(dead), dead.Addr)
		return v.failed()
	}, func() string { return fmtView(v) })
	if v := viewOf(t, witness, httpAddrs[indexOf(cl, witness)], idOf(leader), leader.Addr); !v.live() {
		t.Fatalf("the witness stopped reporting the leader live: %s", fmtView(v))
	}
}

func fmtView(v memberView) string {
	b, _ := json.Marshal(map[string]any{"nodes": v.nodesLine, "slots": v.inSlots, "shards": v.shards, "raft": v.raftHealth,
		"metric": v.metric, "status": v.status})
	return string(b)
}
