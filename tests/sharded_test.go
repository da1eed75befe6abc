package tests

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/slot"
)

// ShardedCluster is groups of replicated nodes under one cluster map.
type ShardedCluster struct {
	Groups [][]*Server
	// RaftAddrs are the members' member ports, as Groups.
	RaftAddrs [][]string
	MapPath   string
}

// StartShardedCluster starts len(slots) groups of n nodes each (ids
// g<i>n<j>), group i owning the slot ranges slots[i], and waits until each
// group leads.
func StartShardedCluster(t *testing.T, n int, slots [][]string, extra ...string) *ShardedCluster {
	return StartShardedClusterWith(t, n, slots, nil, extra...)
}

// StartShardedClusterWith is StartShardedCluster with flags of node j of
// group g from perNode (nil: none).
func StartShardedClusterWith(t *testing.T, n int, slots [][]string, perNode func(g, j int) []string, extra ...string) *ShardedCluster {
	t.Helper()
	var each func(g, j int, _ [][]string) []string
	if perNode != nil {
		each = func(g, j int, _ [][]string) []string { return perNode(g, j) }
	}
	return startSharded(t, 1, n, slots, each, nil, extra...)
}

// StartShardedClusterVia is StartShardedClusterWith whose perNode also
// gets every member's Raft (member port) address, by group (to put
// proxies before them: --raft-dial-via g<g>n<j>=…).
func StartShardedClusterVia(t *testing.T, n int, slots [][]string, perNode func(g, j int, raft [][]string) []string, extra ...string) *ShardedCluster {
	t.Helper()
	return startSharded(t, 1, n, slots, perNode, nil, extra...)
}

// startSharded is StartShardedClusterWith with the map's epoch, and the
// TLS the harness reaches the members with (nil: plain TCP).
func startSharded(t *testing.T, epoch, n int, slots [][]string, perNode func(g, j int, raft [][]string) []string, tlsCfg *tls.Config, extra ...string) *ShardedCluster {
	t.Helper()
	return startShardedOf(t, epoch, n, slots, perNode, nil, tlsCfg, extra...)
}

// startShardedOf is startSharded whose member j of group g runs the
// binary bins(g, j) ("" or a nil bins: this build).
func startShardedOf(t *testing.T, epoch, n int, slots [][]string, perNode func(g, j int, raft [][]string) []string, bins func(g, j int) string,
	tlsCfg *tls.Config, extra ...string) *ShardedCluster {
	t.Helper()
	sc := &ShardedCluster{}
	var b strings.Builder
	fmt.Fprintf(&b, "epoch: %d\ngroups:\n", epoch)
	for g, ranges := range slots {
		var group []*Server
		var members, ports []string
		for j := range n {
			s := &Server{t: t, Addr: freeAddr(t), DataDir: t.TempDir(), TLS: tlsCfg}
			ports = append(ports, freeAddr(t))
			members = append(members, fmt.Sprintf("g%dn%d: %q", g+1, j+1, s.Addr+"@"+ports[j]))
			group = append(group, s)
		}
		sc.RaftAddrs = append(sc.RaftAddrs, ports)
		quoted := make([]string, len(ranges))
		for i, r := range ranges {
			quoted[i] = strconv.Quote(r)
		}
		fmt.Fprintf(&b, "  - id: g%d\n    slots: [%s]\n    members: {%s}\n", g+1, strings.Join(quoted, ", "), strings.Join(members, ", "))
		sc.Groups = append(sc.Groups, group)
	}
	sc.MapPath = filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(sc.MapPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for g, group := range sc.Groups {
		for j, s := range group {
			s.Args = append([]string{"--enable-debug-command", "--data-dir", s.DataDir,
				"--node-id", fmt.Sprintf("g%dn%d", g+1, j+1), "--cluster-map", sc.MapPath}, extra...)
			if perNode != nil {
				s.Args = append(s.Args, perNode(g, j, sc.RaftAddrs)...)
			}
			if bins != nil {
				s.bin = bins(g, j)
			}
			s.Start()
			t.Cleanup(s.Kill)
		}
	}
	for g := range sc.Groups {
		sc.Leader(t, g)
	}
	return sc
}

// Leader waits until exactly one node of group g says it is master.
func (sc *ShardedCluster) Leader(t *testing.T, g int) *Server {
	t.Helper()
	var leader *Server
	eventually(t, fmt.Sprintf("a leader of group %d", g+1), func() bool {
		leader = nil
		for _, s := range sc.Groups[g] {
			if s.cmd != nil && role(t, s) == "master" {
				if leader != nil {
					return false
				}
				leader = s
			}
		}
		return leader != nil
	})
	return leader
}

// Addrs are every node's client address.
func (sc *ShardedCluster) Addrs() []string {
	var out []string
	for _, g := range sc.Groups {
		for _, s := range g {
			out = append(out, s.Addr)
		}
	}
	return out
}

// Two groups of three: cluster clients route every keyed limiter command
// to the group that owns its slot with no help; a key exists only in its
// owner group; redis-cli -c follows MOVED; redis-cli --cluster check finds
// the 16384 slots covered; the topology names both groups; multi-key
// commands across slots are CROSSSLOT.
func TestShardedClusterRoutes(t *testing.T) {
	metrics := [2][3]string{}
	for g := range metrics {
		for j := range metrics[g] {
			metrics[g][j] = freeAddr(t)
		}
	}
	sc := StartShardedClusterWith(t, 3, [][]string{{"0-8191"}, {"8192-12000", "12001-16383"}},
		func(g, j int) []string { return []string{"--metrics-addr", metrics[g][j]} },
		"--rules", writeRules(t, "api.yaml", apiRules))
	leaders := []*Server{sc.Leader(t, 0), sc.Leader(t, 1)}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	eventually(t, "both groups fenced and known", func() bool {
		for i := range 64 {
			if err := cc.Do(ctx(t), "CL.THROTTLE", "warm:"+strconv.Itoa(i), 100, 100, 60).Err(); err != nil {
				return false
			}
		}
		return true
	})
	direct := []*redis.Client{leaders[0].Client(), leaders[1].Client()}
	for i := range 200 {
		key := "user:" + strconv.Itoa(i)
		v, err := cc.Do(ctx(t), "CL.THROTTLE", key, 5, 10, 60).Int64Slice()
		if err != nil || v[0] != 0 {
			t.Fatalf("%s through the cluster client: %v %v", key, v, err)
		}
		s, _ := direct[0].ClusterKeySlot(ctx(t), key).Result()
		owner, other := 0, 1
		if s >= 8192 {
			owner, other = 1, 0
		}
		if n, err := direct[owner].Exists(ctx(t), key).Result(); err != nil || n != 1 {
			t.Fatalf("%s (slot %d) on its owner group %d: %d %v", key, s, owner+1, n, err)
		}
		if err := direct[other].Exists(ctx(t), key).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED "+strconv.FormatInt(s, 10)+" ") {
			t.Fatalf("%s (slot %d) asked of group %d: %v, want MOVED", key, s, other+1, err)
		}
	}
	if out := redisCLI(t, leaders[0].Addr, "-c", "CL.THROTTLE", "user:{g2}", "5", "10", "60"); !strings.HasPrefix(out, "0\n6\n") {
		t.Fatalf("redis-cli -c: %q", out)
	}
	out := redisCLI(t, leaders[1].Addr, "--cluster", "check", leaders[1].Addr)
	if !strings.Contains(out, "[OK] All 16384 slots covered.") || strings.Count(out, "2 additional replica(s)") != 2 {
		t.Fatalf("redis-cli --cluster check:\n%s", out)
	}
	info, _ := direct[0].ClusterInfo(ctx(t)).Result()
	if !strings.Contains(info, "cluster_size:2\r\n") || !strings.Contains(info, "cluster_state:ok\r\n") || !strings.Contains(info, "cluster_known_nodes:6\r\n") {
		t.Fatalf("CLUSTER INFO:\n%s", info)
	}
	shards, err := direct[1].ClusterShards(ctx(t)).Result()
	if err != nil || len(shards) != 2 {
		t.Fatalf("CLUSTER SHARDS: %v %v", shards, err)
	}
	if err := cc.Do(ctx(t), "DEL", "a", "b").Err(); err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Fatalf("DEL across slots: %v", err)
	}
	eventually(t, "rules in both groups", func() bool {
		a, _ := direct[0].Do(ctx(t), "RL.RULES", "LIST", "api").Slice()
		b, _ := direct[1].Do(ctx(t), "RL.RULES", "LIST", "api").Slice()
		return len(a) == 4 && len(b) == 4
	})
	// Checks whose counters sit in either group are answered by any node.
	for i := range 30 {
		if err := cc.Do(ctx(t), "RL.CHECK", "api", "DESCRIPTOR", "user", "u"+strconv.Itoa(i)).Err(); err != nil {
			t.Fatalf("RL.CHECK: %v", err)
		}
	}
	// The status page lists the groups, their slots, leaders and members.
	var st struct {
		Groups []struct {
			ID, Slots, Leader string
			Members           []string
			Self              bool
		} `json:"groups"`
	}
	resp, err := http.Get("http://" + metrics[1][0] + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if len(st.Groups) != 2 || st.Groups[0].Slots != "0-8191" || st.Groups[1].Slots != "8192-16383" ||
		!st.Groups[1].Self || st.Groups[0].Self || !strings.HasSuffix(st.Groups[0].Leader, " "+leaders[0].Addr) || len(st.Groups[1].Members) != 3 ||
		!strings.HasSuffix(st.Groups[1].Leader, " "+leaders[1].Addr) {
		t.Fatalf("status.json groups: %+v", st.Groups)
	}
	// Every member's metrics name both groups, their slots and leaders.
	for g := range metrics {
		for j := range metrics[g] {
			text := scrape(t, metrics[g][j])
			for _, want := range []string{"sluice_cluster_map_epoch 1\n", "sluice_cluster_fenced_epoch 1\n",
				`sluice_cluster_group_slots{group="g1"} 8192`, `sluice_cluster_group_slots{group="g2"} 8192`,
				`sluice_cluster_group_leader_known{group="g1"} 1`, `sluice_cluster_group_leader_known{group="g2"} 1`} {
				if !strings.Contains(text, want) {
					t.Errorf("node %d of group %d: /metrics lacks %q", j+1, g+1, want)
				}
			}
		}
	}
}

// A cluster map that does not load, or a process it does not name, stops
// startup with the reason; --peers and --cluster-map do not go together.
func TestShardedStartRefusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "epoch: 1\ngroups:\n  - id: g1\n    slots: [\"0-16383\"]\n    members: {a1: \""+freeAddr(t)+"\"}\n")
	gap := write("gap.yaml", "epoch: 1\ngroups:\n  - id: g1\n    slots: [\"0-100\"]\n    members: {a1: \"127.0.0.1:7001\"}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster-map", good, "--node-id", "a1", "--peers", "a1=127.0.0.1:7001"}, "give --peers or --cluster-map, not both"},
		{[]string{"--cluster-map", good, "--node-id", "zz"}, `--node-id "zz" is not a member of the cluster map`},
		{[]string{"--cluster-map", gap, "--node-id", "a1"}, "slots 101-16383 are owned by no group"},
		{[]string{"--cluster-map", filepath.Join(dir, "missing.yaml"), "--node-id", "a1"}, "no such file"},
	} {
		out, err := startMustFail(t, append([]string{"--addr", freeAddr(t), "--data-dir", t.TempDir()}, tc.args...)...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: %v\n%s\nwant %q", tc.args, err, out, tc.want)
		}
	}
}

// One group's leader is SIGKILLed under load: the other group's keys see
// no error at all, the killed group's keys answer again after its
// failover, and no key admits more than its limit (a rate that cannot
// refill during the run).
func TestShardedGroupFailoverIsolated(t *testing.T) {
	sc := StartShardedCluster(t, 3, [][]string{{"0-8191"}, {"8192-16383"}})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 16,
		MinRetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 100 * time.Millisecond})
	t.Cleanup(func() { cc.Close() })
	probe := redis.NewClient(&redis.Options{Addr: sc.Groups[0][0].Addr})
	t.Cleanup(func() { probe.Close() })
	// Keys of each group.
	var keys [2][]string
	for i := 0; len(keys[0]) < 8 || len(keys[1]) < 8; i++ {
		k := "k" + strconv.Itoa(i)
		s, _ := probe.ClusterKeySlot(ctx(t), k).Result()
		g := 0
		if s >= 8192 {
			g = 1
		}
		if len(keys[g]) < 8 {
			keys[g] = append(keys[g], k)
		}
	}
	const limit = 400 // max_burst 399, one unit an hour: no refill during the run
	eventually(t, "both groups serve", func() bool {
		for g := range 2 {
			if cc.Do(ctx(t), "CL.THROTTLE", keys[g][0], limit-1, 1, 3600, 0).Err() != nil {
				return false
			}
		}
		return true
	})
	var errs [2]atomic.Int64
	var admitted sync.Map // key → *atomic.Int64
	for g := range 2 {
		for _, k := range keys[g] {
			admitted.Store(k, &atomic.Int64{})
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		g := w % 2
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := keys[g][i%len(keys[g])]
				v, err := cc.Do(context.Background(), "CL.THROTTLE", k, limit-1, 1, 3600).Int64Slice()
				if err != nil {
					errs[g].Add(1)
					continue
				}
				if v[0] == 0 {
					n, _ := admitted.Load(k)
					n.(*atomic.Int64).Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second) // load before the kill (a duration of load, not a wait for an outcome)
	sc.Leader(t, 1).Kill()
	next := sc.Leader(t, 1)
	eventually(t, "the killed group answers after its failover", func() bool {
		// What a client does on errors (go-redis also reloads every 10 s):
		// ask the cluster for its slots again, which name the new leader.
		cc.ReloadState(ctx(t))
		return cc.Do(ctx(t), "CL.THROTTLE", keys[1][0], limit-1, 1, 3600, 0).Err() == nil
	})
	time.Sleep(time.Second) // load after the failover
	close(stop)
	wg.Wait()
	if n := errs[0].Load(); n != 0 {
		t.Errorf("the group whose leader lived saw %d errors", n)
	}
	c := next.Client()
	for g := range 2 {
		for _, k := range keys[g] {
			n, _ := admitted.Load(k)
			got := n.(*atomic.Int64).Load()
			var remaining int64
			if g == 1 {
				v, err := c.Do(ctx(t), "CL.THROTTLE", k, limit-1, 1, 3600, 0).Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				remaining = v[2]
			} else {
				v, err := cc.Do(ctx(t), "CL.THROTTLE", k, limit-1, 1, 3600, 0).Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				remaining = v[2]
			}
			if got > limit || got > limit-remaining {
				t.Errorf("%s (group %d): %d admitted, %d remaining of %d", k, g+1, got, remaining, limit)
			}
		}
	}
	t.Logf("errors: group 1 %d, group 2 (killed leader) %d", errs[0].Load(), errs[1].Load())
}

const crossRules = `domain: x
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: day, requests_per_unit: 10, sluice: {algorithm: gcra, burst: 9}}
  - key: endpoint
    rate_limit: {name: per-endpoint, unit: day, requests_per_unit: 3, sluice: {algorithm: gcra, burst: 2}}
`

// A check whose counters sit in two groups is charged in both or in
// neither: the endpoint's limit (one group) refuses after three checks,
// and every user (half of them in the other group) of a refused check is
// given its unit back; 50 concurrent callers through every node never
// admit past the endpoint's limit.
func TestCrossGroupCheckAllOrNothing(t *testing.T) {
	var metrics [2][3]string
	for g := range metrics {
		for j := range metrics[g] {
			metrics[g][j] = freeAddr(t)
		}
	}
	sc := StartShardedClusterWith(t, 3, [][]string{{"0-8191"}, {"8192-16383"}},
		func(g, j int) []string { return []string{"--metrics-addr", metrics[g][j]} }, "--rules", writeRules(t, "x.yaml", crossRules))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	eventually(t, "rules in both groups, both fenced", func() bool {
		for g := range 2 {
			v, _ := sc.Leader(t, g).Client().Do(ctx(t), "RL.RULES", "LIST", "x").Slice()
			if len(v) != 2 {
				return false
			}
		}
		return cc.Do(ctx(t), "RL.CHECK", "x", "COST", 0, "DESCRIPTOR", "user", "warm").Err() == nil
	})
	userLeft := func(u string) int64 {
		v, err := cc.Do(ctx(t), "RL.CHECK", "x", "COST", 0, "DESCRIPTOR", "user", u).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v[2].(int64)
	}
	admitted := 0
	for i := range 12 {
		u := "u" + strconv.Itoa(i)
		v, err := cc.Do(ctx(t), "RL.CHECK", "x", "DESCRIPTOR", "user", u, "DESCRIPTOR", "endpoint", "/e").Slice()
		if err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		want := int64(9) // charged
		if v[0] == int64(1) {
			want = 10 // refused: the user's unit given back
			if v[5] != "per-endpoint" {
				t.Fatalf("check %d refused by %v", i, v[5])
			}
		} else {
			admitted++
		}
		eventually(t, "user "+u+"'s counter settled", func() bool { return userLeft(u) == want })
	}
	if admitted != 3 {
		t.Fatalf("%d checks admitted on an endpoint limit of 3", admitted)
	}
	// The coordinators counted checks across groups, admitted and refused,
	// and the refunds of the refused ones' parts.
	sum := func(series string) (n float64) {
		for g := range metrics {
			for j := range metrics[g] {
				for _, line := range strings.Split(scrape(t, metrics[g][j]), "\n") {
					if v, ok := strings.CutPrefix(line, series+" "); ok {
						f, _ := strconv.ParseFloat(v, 64)
						n += f
					}
				}
			}
		}
		return n
	}
	if sum(`sluice_crossgroup_checks_total{outcome="admitted"}`) < 1 || sum(`sluice_crossgroup_checks_total{outcome="refused"}`) < 1 ||
		sum(`sluice_crossgroup_part_finishes_total{outcome="cancelled"}`) < 1 || sum(`sluice_crossgroup_parts_total`) < 2 {
		t.Fatalf("crossgroup metrics: admitted %v refused %v cancelled %v parts %v", sum(`sluice_crossgroup_checks_total{outcome="admitted"}`),
			sum(`sluice_crossgroup_checks_total{outcome="refused"}`), sum(`sluice_crossgroup_part_finishes_total{outcome="cancelled"}`),
			sum(`sluice_crossgroup_parts_total`))
	}

	// Every member knows each group's leader and how far its log time is
	// from the wall clock (a running group: within a tick and a probe).
	maxLag := -1.0
	for g := range metrics {
		for j := range metrics[g] {
			page := scrape(t, metrics[g][j])
			if !strings.Contains(page, fmt.Sprintf(`sluice_cluster_member_group{group="g%d"} 1`, g+1)) {
				t.Errorf("member %d of group %d does not name its group", j+1, g+1)
			}
			for h := range 2 {
				leader := sc.Leader(t, h).Addr
				if !strings.Contains(page, fmt.Sprintf(`sluice_cluster_group_leader{group="g%d",leader=%q} 1`, h+1, leader)) {
					t.Errorf("member %d of group %d does not name group %d's leader %s", j+1, g+1, h+1, leader)
				}
				lag := -1e9
				for _, line := range strings.Split(page, "\n") {
					if v, ok := strings.CutPrefix(line, fmt.Sprintf(`sluice_cluster_group_lag_seconds{group="g%d"} `, h+1)); ok {
						lag, _ = strconv.ParseFloat(v, 64)
					}
				}
				// Behind the wall clock by up to a tick and a probe, never
				// ahead (but for the members' clock reads).
				if lag < -0.05 || lag > 3 {
					t.Errorf("member %d of group %d: group %d's lag %v s", j+1, g+1, h+1, lag)
				}
				maxLag = max(maxLag, lag)
			}
		}
	}

	if maxLag < 0.05 {
		t.Errorf("no group seen behind the wall clock at all (largest lag %v s): the lags measure nothing", maxLag)
	}

	// An override and a scale set through one node apply in every group:
	// each group's own copy of the configuration changes (a scale's record
	// holds the instant its group applied it: the groups' copies differ
	// by it).
	configs := func() [2]string {
		var d [2]string
		for g := range 2 {
			res, err := sc.AsMember(t, g, nil, &machine.PlacementRequest{Kind: machine.PlaceDigest})
			if err != nil || res.Config == "" {
				t.Fatalf("group %d's configuration: %+v %v", g+1, res, err)
			}
			d[g] = res.Config
		}
		return d
	}
	before := configs()
	if err := cc.Do(ctx(t), "RL.OVERRIDE", "SET", "x", 50, "day", "DESCRIPTOR", "user", "vip").Err(); err != nil {
		t.Fatal(err)
	}
	overridden := configs()
	if err := cc.Do(ctx(t), "RL.SCALE", "SET", "x", "0.5").Err(); err != nil {
		t.Fatal(err)
	}
	scaled := configs()
	if before[0] != before[1] || overridden[0] != overridden[1] ||
		overridden[0] == before[0] || scaled[0] == overridden[0] || scaled[1] == overridden[1] {
		t.Fatalf("the groups' configurations: before %v, after the override %v, after the scale %v", before, overridden, scaled)
	}
	if err := cc.Do(ctx(t), "RL.SCALE", "SET", "x", "1").Err(); err != nil {
		t.Fatal(err)
	}

	// 50 callers through every node on a second endpoint.
	clients := make([]*redis.Client, 0, 6)
	for _, a := range sc.Addrs() {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: a}))
	}
	t.Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
	})
	var ok, refusedN atomic.Int64
	var wg sync.WaitGroup
	for w := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 6 {
				v, err := cc.Do(context.Background(), "RL.CHECK", "x", "DESCRIPTOR", "user", fmt.Sprintf("w%d-%d", w, i), "DESCRIPTOR", "endpoint", "/busy").Slice()
				if err != nil {
					t.Errorf("caller %d: %v", w, err)
					return
				}
				if v[0] == int64(0) {
					ok.Add(1)
				} else {
					refusedN.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() > 3 || ok.Load() == 0 {
		t.Fatalf("%d of %d concurrent checks admitted on an endpoint limit of 3", ok.Load(), ok.Load()+refusedN.Load())
	}
}

// A group without a leader fails only the checks that touch it
// (CLUSTERDOWN), and the part another group charged is given back; checks
// that stay in a live group go on.
func TestCrossGroupCheckWithAGroupDown(t *testing.T) {
	sc := StartShardedCluster(t, 3, [][]string{{"0-8191"}, {"8192-16383"}}, "--rules", writeRules(t, "x.yaml", crossRules))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	t.Cleanup(func() { cc.Close() })
	leaders := []*redis.Client{sc.Leader(t, 0).Client(), sc.Leader(t, 1).Client()}
	eventually(t, "rules in both groups, both fenced", func() bool {
		for g := range 2 {
			if v, _ := leaders[g].Do(ctx(t), "RL.RULES", "LIST", "x").Slice(); len(v) != 2 {
				return false
			}
		}
		return cc.Do(ctx(t), "RL.CHECK", "x", "COST", 0, "DESCRIPTOR", "user", "warm").Err() == nil
	})
	// A user whose counter is in each group: charge one unit, and see
	// which group's keys hold it.
	var users [2]string
	for i := 0; users[0] == "" || users[1] == ""; i++ {
		if i == 200 {
			t.Fatalf("no user's counter found in each group: %q", users)
		}
		u := "probe" + strconv.Itoa(i)
		if err := cc.Do(ctx(t), "RL.CHECK", "x", "DESCRIPTOR", "user", u).Err(); err != nil {
			t.Fatal(err)
		}
		for g := range 2 {
			keys, _ := leaders[g].Keys(ctx(t), "*="+strconv.Itoa(len(u))+":"+u+"#*").Result()
			if len(keys) == 1 && users[g] == "" {
				users[g] = u
			}
		}
	}
	left := func(u string) int64 {
		v, err := cc.Do(ctx(t), "RL.CHECK", "x", "COST", 0, "DESCRIPTOR", "user", u).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v[2].(int64)
	}
	// The domain "x" is in slot 16287, group 2's: its leader coordinates.
	// Group 1 loses its majority.
	before := left(users[1])
	leader1 := sc.Leader(t, 0)
	leader1.Kill()
	for _, s := range sc.Groups[0] {
		if s != leader1 {
			s.Kill()
			break
		}
	}
	var last error
	eventually(t, "a check touching the group without a leader fails with CLUSTERDOWN", func() bool {
		last = cc.Do(ctx(t), "RL.CHECK", "x", "DESCRIPTOR", "user", users[0], "DESCRIPTOR", "user", users[1]).Err()
		return last != nil && strings.HasPrefix(last.Error(), "CLUSTERDOWN a group this command spans has no leader")
	})
	eventually(t, "the live group's part given back", func() bool { return left(users[1]) == before })
	if v := checkInts(t, cc, "RL.CHECK", "x", "DESCRIPTOR", "user", users[1]); v[0] != 0 || v[2] != before-1 {
		t.Fatalf("a check within the live group: %v (last cross-group error: %v)", v, last)
	}
}

// waitShardedRules waits until domain has n rules in every group and both
// groups are fenced.
func waitShardedRules(t *testing.T, sc *ShardedCluster, domain string, n int) {
	t.Helper()
	eventually(t, "rules in every group", func() bool {
		for g := range sc.Groups {
			if v, _ := sc.Leader(t, g).Client().Do(ctx(t), "RL.RULES", "LIST", domain).Slice(); len(v) != n {
				return false
			}
		}
		return true
	})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 8})
	defer cc.Close()
	eventually(t, "every group fenced", func() bool {
		// Keys over many slots: every group answers (not TRYAGAIN).
		for i := range 16 {
			if cc.Do(ctx(t), "CL.THROTTLE", fmt.Sprintf("fence-probe-%d", i), 100, 100, 60, 0).Err() != nil {
				return false
			}
		}
		return true
	})
}

// keysOnlyInOwners checks that each key a client printed ("key <k>" lines
// of out) exists in the group owning its slot and in no other, and that
// every group's members hold the same state (DEBUG DIGEST).
func keysOnlyInOwners(t *testing.T, sc *ShardedCluster, out string) {
	t.Helper()
	owner := func(s int) int {
		if s < 8192 {
			return 0
		}
		return 1
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		k, ok := strings.CutPrefix(strings.TrimSpace(line), "key ")
		if !ok {
			continue
		}
		n++
		for g := range sc.Groups {
			keys, err := sc.Leader(t, g).Client().Keys(ctx(t), k).Result()
			if want := map[bool]int{true: 1, false: 0}[g == owner(slot.Of([]byte(k)))]; err != nil || len(keys) != want {
				t.Fatalf("key %s (slot %d): group %d holds %v (%v)", k, slot.Of([]byte(k)), g+1, keys, err)
			}
		}
	}
	if n == 0 {
		t.Fatalf("the client wrote no key:\n%s", out)
	}
	for g, group := range sc.Groups {
		eventually(t, fmt.Sprintf("group %d's members at one digest", g+1), func() bool {
			want := ""
			for _, s := range group {
				d, err := s.Client().Do(ctx(t), "DEBUG", "DIGEST").Text()
				if err != nil || (want != "" && d != want) {
					return false
				}
				want = d
			}
			return true
		})
	}
}
