package tests

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/netproxy"
	"github.com/sluice-rl/sluice/slot"
)

// migration is one entry of CLUSTER GETSLOTMIGRATIONS.
type migration map[string]any

func slotMigrations(t *testing.T, c *redis.Client) []migration {
	t.Helper()
	v, err := c.Do(ctx(t), "CLUSTER", "GETSLOTMIGRATIONS").Slice()
	if err != nil {
		t.Fatalf("CLUSTER GETSLOTMIGRATIONS: %v", err)
	}
	var out []migration
	for _, e := range v {
		m := migration{}
		switch f := e.(type) {
		case []any: // RESP2: field, value, …
			for i := 0; i+1 < len(f); i += 2 {
				m[fmt.Sprint(f[i])] = f[i+1]
			}
		case map[any]any:
			for k, v := range f {
				m[fmt.Sprint(k)] = v
			}
		}
		out = append(out, m)
	}
	return out
}

// waitMigrated waits until every migration the group's leader lists has
// ended, and returns them; each must have succeeded.
func waitMigrated(t *testing.T, sc *movingCluster, g int) []migration {
	t.Helper()
	var ms []migration
	eventuallyExplained(t, "the migrations ended", func() bool {
		ms = slotMigrations(t, sc.Leader(t, g).Client())
		for _, m := range ms {
			if m["state"] == "running" {
				return false
			}
		}
		return len(ms) > 0
	}, func() string { return fmt.Sprint(ms) })
	for _, m := range ms {
		if m["state"] != "success" {
			t.Fatalf("migration %v", m)
		}
	}
	return ms
}

// migrationEnded waits until the first migration the leader c lists has
// ended, and fails the test unless it succeeded.
func migrationEnded(t *testing.T, leader func() *redis.Client) {
	t.Helper()
	var ms []migration
	eventuallyExplained(t, "the migration ended", func() bool {
		ms = slotMigrations(t, leader())
		return len(ms) > 0 && ms[0]["state"] != "running"
	}, func() string { return fmt.Sprint(ms) })
	if ms[0]["state"] != "success" {
		t.Fatalf("migration %v", ms[0])
	}
}

// digestSlots is DEBUG DIGEST-SLOTS from to on c: the digest and count.
func digestSlots(t *testing.T, c *redis.Client, from, to int) (string, int64) {
	t.Helper()
	v, err := c.Do(ctx(t), "DEBUG", "DIGEST-SLOTS", from, to).Slice()
	if err != nil || len(v) != 2 {
		t.Fatalf("DEBUG DIGEST-SLOTS %d %d: %v %v", from, to, v, err)
	}
	return v[0].(string), v[1].(int64)
}

// settledSlots is digestSlots once the records of the slots stop changing:
// the load's checks across groups leave parts and their marks that live
// partTTL (10 s) after the last call — a digest taken while they expire
// is of records the target will not hold when it is read.
func settledSlots(t *testing.T, c *redis.Client, from, to int) (string, int64) {
	t.Helper()
	const quiet = 11 * time.Second
	d, n := digestSlots(t, c, from, to)
	since := time.Now()
	for deadline := time.Now().Add(40 * time.Second); time.Since(since) < quiet; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("slots %d-%d kept changing for 40 s", from, to)
		}
		if d2, n2 := digestSlots(t, c, from, to); d2 != d || n2 != n {
			d, n, since = d2, n2, time.Now()
		}
	}
	return d, n
}

// moveLoad is callers hammering CL.THROTTLE, QUOTA.CHECK and SW.CHECK
// through a ClusterClient, counting what each key was granted.
type moveLoad struct {
	cc      *redis.ClusterClient
	keys    []string
	mu      sync.Mutex
	granted map[string]int
	calls   atomic.Int64
	fails   atomic.Int64
	// grpcCalls counts the ShouldRateLimit calls among calls.
	grpcCalls atomic.Int64
	stop      chan struct{}
	wg        sync.WaitGroup
}

// moveLimit is each key's limit: CL.THROTTLE burst 9 (10 at once, one
// more a day), QUOTA.CHECK 10 a month, SW.CHECK 10 an hour, RL.CHECK's
// rule as CL.THROTTLE's — nothing refills during a test.
const moveLimit = 10

const moveRules = `domain: mv
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 10, sluice: {algorithm: gcra, burst: 9}}
`

// movingCluster is two groups of three, with moveRules; metrics[g][j] is
// member j of group g's --http-addr.
type movingCluster struct {
	*ShardedCluster
	metrics [2][3]string
	grpc    [2][3]string
	rules   string
}

func startMoving(t *testing.T) *movingCluster {
	mc := &movingCluster{rules: writeRules(t, "mv.yaml", moveRules)}
	for g := range mc.metrics {
		for j := range mc.metrics[g] {
			mc.metrics[g][j], mc.grpc[g][j] = freeAddr(t), freeAddr(t)
		}
	}
	mc.ShardedCluster = StartShardedClusterWith(t, 3, [][]string{{"0-8191"}, {"8192-16383"}},
		func(g, j int) []string {
			return []string{"--http-addr", mc.metrics[g][j], "--grpc-addr", mc.grpc[g][j]}
		},
		"--rules", mc.rules)
	return mc
}

// leaderMetrics is group g's leader's --http-addr.
func (mc *movingCluster) leaderMetrics(t *testing.T, g int) string {
	l := mc.Leader(t, g)
	for j, s := range mc.Groups[g] {
		if s == l {
			return mc.metrics[g][j]
		}
	}
	t.Fatal("no leader")
	return ""
}

func startMoveLoad(t *testing.T, sc *movingCluster, nkeys, callers int) *moveLoad {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 64,
		MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond})
	t.Cleanup(func() { cc.Close() })
	l := &moveLoad{cc: cc, granted: map[string]int{}, stop: make(chan struct{})}
	for i := range nkeys {
		l.keys = append(l.keys, "mv:"+strconv.Itoa(i))
	}
	command := func(k string) []any {
		switch k[len(k)-1] % 4 {
		case 0:
			return []any{"CL.THROTTLE", k, moveLimit - 1, 1, 86400}
		case 1:
			return []any{"QUOTA.CHECK", k, moveLimit, "month"}
		case 2:
			return []any{"SW.CHECK", k, moveLimit, 3600}
		}
		// Two counters (often in two groups), charged both or neither:
		// k's checks are admitted at most moveLimit times.
		return []any{"RL.CHECK", "mv", "DESCRIPTOR", "user", k, "DESCRIPTOR", "user", k + "~"}
	}
	admitted := func(v any) bool { return v.([]any)[0].(int64) == 0 } // the limiter reply: 0 allowed
	eventually(t, "both groups serve, with the rules", func() bool {
		for _, k := range l.keys[:20] {
			if err := cc.Do(ctx(t), "EXISTS", k).Err(); err != nil {
				return false
			}
		}
		for g := range sc.Groups {
			if v, _ := sc.Leader(t, g).Client().Do(ctx(t), "RL.RULES", "LIST", "mv").Slice(); len(v) == 0 {
				return false
			}
		}
		return true
	})
	for w := range callers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				k := l.keys[r.IntN(len(l.keys))]
				v, err := cc.Do(ctx(t), command(k)...).Result()
				l.calls.Add(1)
				if err != nil {
					if l.fails.Add(1) <= 20 {
						t.Logf("%s: %v", k, err)
					}
					continue
				}
				if admitted(v) {
					l.mu.Lock()
					l.granted[k]++
					l.mu.Unlock()
				}
			}
		}()
	}
	// Envoy's ShouldRateLimit through every node's gRPC door, on the
	// RL.CHECK keys: the same two counters, charged both or neither.
	for w := range 2 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			var clients []pb.RateLimitServiceClient
			for g := range sc.grpc {
				for _, addr := range sc.grpc[g] {
					c, _ := rlsClient(t, addr)
					clients = append(clients, c)
				}
			}
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				k := l.keys[r.IntN(len(l.keys))]
				if k[len(k)-1]%4 != 3 {
					continue
				}
				res, err := clients[r.IntN(len(clients))].ShouldRateLimit(ctx(t), rlsRequest("mv", 1, "user="+k, "user="+k+"~"))
				l.calls.Add(1)
				l.grpcCalls.Add(1)
				if err != nil {
					if l.fails.Add(1) <= 20 {
						t.Logf("gRPC %s: %v", k, err)
					}
					continue
				}
				if res.OverallCode == pb.RateLimitResponse_OK {
					l.mu.Lock()
					l.granted[k]++
					l.mu.Unlock()
				}
			}
		}()
	}
	// Before a move, keys of the moving slots use up their limits: a
	// counter a move lost would start afresh and admit again.
	eventually(t, "keys at their limit", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		full := 0
		for _, n := range l.granted {
			if n == moveLimit {
				full++
			}
		}
		return full >= nkeys/4
	})
	return l
}

// finish waits for n more calls, stops the callers and checks no key was
// granted more than its limit; it returns how many keys of slots
// [from, to] were granted something.
func (l *moveLoad) finish(t *testing.T, n int64, from, to int) int {
	t.Helper()
	before := l.calls.Load()
	eventuallyExplained(t, "calls after the move", func() bool { return l.calls.Load() > before+n },
		func() string {
			return fmt.Sprintf("%d calls (%d before), %d failed", l.calls.Load(), before, l.fails.Load())
		})
	close(l.stop)
	l.wg.Wait()
	inRange := 0
	for _, k := range l.keys {
		if l.granted[k] > moveLimit {
			t.Errorf("%s (slot %d) admitted %d times, limit %d", k, slot.Of([]byte(k)), l.granted[k], moveLimit)
		}
		if s := slot.Of([]byte(k)); from <= s && s <= to && l.granted[k] > 0 {
			inRange++
		}
	}
	if inRange == 0 {
		t.Fatalf("no key of slots %d-%d was admitted", from, to)
	}
	return inRange
}

// sameCounters waits until every member of each group holds the same
// counters.
func sameCounters(t *testing.T, sc *movingCluster) {
	t.Helper()
	for g, group := range sc.Groups {
		eventually(t, fmt.Sprintf("group %d's members hold the same counters", g+1), func() bool {
			want := ""
			for _, s := range group {
				if s.cmd == nil {
					continue
				}
				d, _ := digestSlots(t, s.Client(), 0, slot.Count-1)
				if want != "" && d != want {
					return false
				}
				want = d
			}
			return true
		})
	}
}

// Half of one group's slots move to the other while a go-redis
// ClusterClient hammers CL.THROTTLE, QUOTA.CHECK, SW.CHECK and RL.CHECK (two
// counters, often in two groups), and Envoy's ShouldRateLimit reaches every
// node's gRPC door on the same counters, on keys in
// the moving half and in the staying half: no key is ever admitted more
// than its limit (a counter live in two groups, or lost and started
// afresh, would admit more) and no call fails; afterwards each key is only
// in its new owner, every member of a group holds the same counters, the
// job lists what Valkey 9 lists, and redis-cli --cluster check passes. A
// second, idle move shows the target's digest of the moved slots equal to
// the source's before it.
func TestMigrateSlotsUnderLoad(t *testing.T) {
	sc := startMoving(t)
	load := startMoveLoad(t, sc, 60, 8)
	target := sc.Groups[1][0].Client()
	nodeID, err := target.Do(ctx(t), "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	src := sc.Leader(t, 0).Client()
	checks := checkWhileMoving(t, sc.ShardedCluster, src)
	if err := src.Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, 4095, "NODE", nodeID).Err(); err != nil {
		t.Fatalf("MIGRATESLOTS: %v", err)
	}
	if err := src.Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 4000, 4100, "NODE", nodeID).Err(); err == nil ||
		!strings.Contains(err.Error(), "already migrating") {
		t.Fatalf("an overlapping migration: %v", err)
	}
	ms := waitMigrated(t, sc, 0)
	if n := checks(); n < 3 {
		t.Fatalf("only %d redis-cli --cluster check runs while chunks moved", n)
	} else {
		t.Logf("%d redis-cli --cluster check runs while chunks moved, each clean", n)
	}
	moved := load.finish(t, 500, 0, 4095)
	if load.fails.Load() != 0 || load.grpcCalls.Load() == 0 {
		t.Fatalf("%d of %d calls failed through the move (%d through gRPC)", load.fails.Load(), load.calls.Load(), load.grpcCalls.Load())
	}
	m := ms[0]
	if len(m["name"].(string)) != 40 || m["operation"] != "EXPORT" || m["slot_ranges"] != "0-4095" ||
		m["target_node"] != nodeID || m["slots_moved"] != "0-4095" || m["keys_moved"].(int64) == 0 {
		t.Fatalf("the migration's entry: %v", m)
	}
	t.Logf("%d calls, %d keys of the moved slots charged, %v", load.calls.Load(), moved, m)
	// The source leader counted what it moved and each chunk's window.
	met := sc.leaderMetrics(t, 0)
	metric := func(series string) float64 { return metricValue(t, met, series) }
	chunks := metric("sluice_slot_migration_chunks_total")
	if chunks < 4096/64 || metric("sluice_slot_migration_keys_total") != float64(m["keys_moved"].(int64)) ||
		metric("sluice_slot_migration_cutover_seconds_count") != chunks ||
		metric("sluice_slot_migrations_running") != 0 || metric("sluice_slot_migration_pending_seconds") != 0 {
		t.Fatalf("migration metrics: chunks %v keys %v windows %v running %v pending %v", chunks,
			metric("sluice_slot_migration_keys_total"), metric("sluice_slot_migration_cutover_seconds_count"),
			metric("sluice_slot_migrations_running"), metric("sluice_slot_migration_pending_seconds"))
	}
	// Each key only in its owner: the moved slots in group 2 only.
	if _, n := digestSlots(t, sc.Leader(t, 0).Client(), 0, 4095); n != 0 {
		t.Fatalf("group 1 keeps %d counters of the slots it moved", n)
	}
	sameCounters(t, sc)
	// After it, a clean check: every slot covered, no slot open (each
	// member hears the job ended within a probe).
	var out []byte
	eventuallyExplained(t, "redis-cli --cluster check passes clean", func() bool {
		host, port, _ := net.SplitHostPort(sc.Groups[1][0].Addr)
		var err error
		out, err = exec.Command("redis-cli", "-h", host, "-p", port, "--cluster", "check", sc.Groups[0][0].Addr).CombinedOutput()
		return err == nil && strings.Contains(string(out), "[OK] All 16384 slots covered.") && !strings.Contains(string(out), "[WARNING]")
	}, func() string { return string(out) })
	// An idle move: the target's digest of the slots after it is the
	// source's before it.
	want, n := settledSlots(t, sc.Leader(t, 0).Client(), 4096, 6143)
	if n == 0 {
		t.Fatal("no counters in 4096-6143 to move")
	}
	if err := sc.Leader(t, 0).Client().Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 4096, 6143, "NODE", nodeID).Err(); err != nil {
		t.Fatal(err)
	}
	waitMigrated(t, sc, 0)
	for _, s := range sc.Groups[1] {
		var got string
		var k int64
		eventuallyExplained(t, "the target's members hold the source's counters", func() bool {
			got, k = digestSlots(t, s.Client(), 4096, 6143)
			return got == want && k == n
		}, func() string {
			return fmt.Sprintf("%s holds %d records (digest %s), the source held %d (%s)", s.Addr, k, got, n, want)
		})
	}
}

// checkWhileMoving runs redis-cli --cluster check over and over, through
// each member in turn, while the migration src leads runs: every run that
// starts after a chunk moved and ends before the job did must find every
// slot covered, the members agreeing and the migration reported (open
// slots). The returned func stops it and says how many such runs there
// were.
func checkWhileMoving(t *testing.T, sc *ShardedCluster, src *redis.Client) func() int {
	t.Helper()
	var members []string
	for _, g := range sc.Groups {
		for _, s := range g {
			members = append(members, s.Addr)
		}
	}
	// moving: a chunk has moved and the job still runs; ended: it ended.
	moving := func() (moving, ended bool) {
		v, err := src.Do(ctx(t), "CLUSTER", "GETSLOTMIGRATIONS").Slice()
		if err != nil || len(v) == 0 {
			return false, false
		}
		job := map[string]any{}
		switch f := v[len(v)-1].(type) {
		case []any:
			for i := 0; i+1 < len(f); i += 2 {
				job[fmt.Sprint(f[i])] = f[i+1]
			}
		case map[any]any:
			for k, v := range f {
				job[fmt.Sprint(k)] = v
			}
		}
		running := job["state"] == "running"
		return running && job["slots_moved"] != "", !running
	}
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		runs := 0
		defer func() { done <- runs }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			before, ended := moving()
			if ended {
				return
			}
			host, port, _ := net.SplitHostPort(members[i%len(members)])
			out, _ := exec.Command("redis-cli", "-h", host, "-p", port, "--cluster", "check", members[i%len(members)]).CombinedOutput()
			if after, _ := moving(); !before || !after {
				continue
			}
			runs++
			text := string(out)
			if !strings.Contains(text, "[OK] All nodes agree about slots configuration.") ||
				!strings.Contains(text, "[OK] All 16384 slots covered.") || !strings.Contains(text, "migrating") {
				t.Errorf("redis-cli --cluster check through %s while chunks move:\n%s", members[i%len(members)], text)
				return
			}
		}
	}()
	return func() int {
		close(stop)
		return <-done
	}
}

// A move survives its source leader and then its target leader killed
// (SIGKILL) mid-way: the source's new leader finds the job where the log
// left it, finishes the pending chunk (whose import applied or not) and
// the rest; nothing is admitted twice, each group's members agree.
func TestMigrateSlotsSurvivesLeaderKills(t *testing.T) {
	sc := startMoving(t)
	load := startMoveLoad(t, sc, 60, 6)
	nodeID, _ := sc.Groups[1][0].Client().Do(ctx(t), "CLUSTER", "MYID").Text()
	src := sc.Leader(t, 0)
	if err := src.Client().Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, 6143, "NODE", nodeID).Err(); err != nil {
		t.Fatal(err)
	}
	progressed := func(c *redis.Client) func() bool {
		return func() bool {
			ms, err := c.Do(ctx(t), "CLUSTER", "GETSLOTMIGRATIONS").Slice()
			return err == nil && len(ms) > 0 && strings.Contains(fmt.Sprint(ms), "slots_moved 0-")
		}
	}
	eventually(t, "a chunk moved", progressed(src.Client()))
	if ms := slotMigrations(t, src.Client()); ms[0]["state"] != "running" {
		t.Fatalf("the move ended before its leader was killed: %v", ms[0])
	}
	src.Kill()
	dst := sc.Leader(t, 1)
	eventually(t, "a new source leader", func() bool { return sc.Leader(t, 0) != src })
	dst.Kill()
	ms := waitMigrated(t, sc, 0)
	if ms[0]["slots_moved"] != "0-6143" {
		t.Fatalf("%v", ms[0])
	}
	// What a cluster client does after errors (go-redis also reloads
	// every 10 s): ask for the slots again, which name the new leaders.
	eventually(t, "the client follows the new leaders", func() bool {
		load.cc.ReloadState(ctx(t))
		return load.cc.Do(ctx(t), "CL.THROTTLE", load.keys[0], moveLimit-1, 1, 86400, 0).Err() == nil
	})
	load.finish(t, 300, 0, 6143)
	if _, n := digestSlots(t, sc.Leader(t, 0).Client(), 0, 6143); n != 0 {
		t.Fatalf("group 1 keeps %d counters of the slots it moved", n)
	}
	sameCounters(t, sc)
	t.Logf("%d calls, %d failed (leaders killed)", load.calls.Load(), load.fails.Load())
}

// CLUSTER MIGRATESLOTS refuses what cannot start, with nothing started; a
// single node has no migrations; CANCELSLOTMIGRATIONS stops a job before its
// next chunk — the chunks moved stay moved, the rest stays — and every
// member of the group lists the job (it is replicated state).
func TestMigrateSlotsRefusalsAndCancel(t *testing.T) {
	single := StartServer(t)
	if err := single.Client().Do(ctx(t), "CLUSTER", "GETSLOTMIGRATIONS").Err(); err == nil || !strings.Contains(err.Error(), "sharded cluster") {
		t.Fatalf("a single node: %v", err)
	}
	sc := startMoving(t)
	leader := sc.Leader(t, 0)
	eventually(t, "group 1 fenced", func() bool {
		info, _ := leader.Client().Info(ctx(t), "cluster").Result()
		return strings.Contains(info, "sluice_slots_epoch:")
	})
	var follower *Server
	for _, s := range sc.Groups[0] {
		if s != leader {
			follower = s
		}
	}
	own, _ := leader.Client().Do(ctx(t), "CLUSTER", "MYID").Text()
	other, _ := sc.Groups[1][1].Client().Do(ctx(t), "CLUSTER", "MYID").Text()
	for _, tc := range []struct {
		on   *Server
		args []any
		want string
	}{
		{follower, []any{"SLOTSRANGE", 0, 10, "NODE", other}, "send it to this group's leader, " + leader.Addr},
		{leader, []any{"SLOTSRANGE", 0, 10}, "wrong number of arguments"},
		{leader, []any{"SLOTSRANGE", 0, 10, "NOD", other}, "syntax"},
		{leader, []any{"SLOTSRANGE", 10, 5, "NODE", other}, "invalid slot range"},
		{leader, []any{"SLOTSRANGE", 0, 16384, "NODE", other}, "invalid slot range"},
		{leader, []any{"SLOTSRANGE", 8000, 8200, "NODE", other}, "slot 8192 is not this group's"},
		{leader, []any{"SLOTSRANGE", 0, 10, "NODE", own}, "is in this group"},
		{leader, []any{"SLOTSRANGE", 0, 10, "NODE", "nobody"}, "unknown node"},
		{leader, []any{"SLOTSRANGE", 0, 10, "NODE", other, "SLOTSRANGE", 5, 20, "NODE", other}, "slot 5 is named twice"},
	} {
		err := tc.on.Client().Do(ctx(t), append([]any{"CLUSTER", "MIGRATESLOTS"}, tc.args...)...).Err()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("MIGRATESLOTS %v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if ms := slotMigrations(t, leader.Client()); len(ms) != 0 {
		t.Fatalf("a refused MIGRATESLOTS started %v", ms)
	}
	// Cancel a move of every slot of group 1 once its first chunk moved.
	if err := leader.Client().Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, 8191, "NODE", other).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a chunk moved", func() bool {
		ms := slotMigrations(t, leader.Client())
		return len(ms) == 1 && ms[0]["slots_moved"] != ""
	})
	if err := leader.Client().Do(ctx(t), "CLUSTER", "CANCELSLOTMIGRATIONS").Err(); err != nil {
		t.Fatal(err)
	}
	var m migration
	eventually(t, "the job cancelled", func() bool {
		m = slotMigrations(t, leader.Client())[0]
		return m["state"] == "cancelled"
	})
	movedTo := -1
	if done := m["slots_moved"].(string); done != "" {
		var from int
		if _, err := fmt.Sscanf(done, "%d-%d", &from, &movedTo); err != nil || from != 0 || strings.Contains(done, " ") {
			t.Fatalf("slots moved %q: not a prefix of the job's", done)
		}
	}
	if movedTo < 0 || movedTo >= 8191 {
		t.Fatalf("the cancel came before the first chunk or after the whole move: %v", m)
	}
	eventually(t, "every member lists the job", func() bool {
		ms := slotMigrations(t, follower.Client())
		return len(ms) == 1 && ms[0]["name"] == m["name"] && ms[0]["state"] == "cancelled"
	})
	// The rest stays group 1's, the moved chunks group 2's: CLUSTER NODES
	// shows them once the cancelled job is no longer shown (a second
	// after its end).
	want := fmt.Sprintf("slots:[%d-8191]", movedTo+1)
	var out []byte
	eventuallyExplained(t, "redis-cli --cluster check passes, group 1 keeping "+want, func() bool {
		host, port, _ := net.SplitHostPort(leader.Addr)
		out, _ = exec.Command("redis-cli", "-h", host, "-p", port, "--cluster", "check", leader.Addr).CombinedOutput()
		return strings.Contains(string(out), "[OK] All 16384 slots covered.") && !strings.Contains(string(out), "[ERR]") &&
			strings.Contains(string(out), want)
	}, func() string { return string(out) })
	t.Logf("cancelled after %d slots", movedTo+1)
}

// The cluster grows from two groups to three while a ClusterClient
// hammers it: CLUSTER ADDGROUP names a third group, whose three processes
// start with --cluster-join, and a quarter of the slots move to it from
// both groups; then it shrinks back: the slots move home (one command,
// two jobs), and CLUSTER REMOVEGROUP removes the empty group (refused
// while it owns slots). No key is admitted past its limit (monthly quotas
// keep their counts through both moves); every member of each group holds
// the same counters; redis-cli --cluster check passes with three masters,
// then with two.
func TestGrowAndShrinkUnderLoad(t *testing.T) {
	mc := startMoving(t)
	load := startMoveLoad(t, mc, 60, 6)
	var g3 []*Server
	add := []any{"CLUSTER", "ADDGROUP", "g3"}
	for j := 1; j <= 3; j++ {
		s := &Server{t: t, Addr: freeAddr(t), DataDir: t.TempDir()}
		add = append(add, fmt.Sprintf("g3n%d", j), s.Addr, freeAddr(t))
		s.Args = []string{"--enable-debug-command", "--data-dir", s.DataDir, "--node-id", fmt.Sprintf("g3n%d", j),
			"--cluster-join", mc.Groups[1][j-1].Addr, "--rules", mc.rules}
		g3 = append(g3, s)
	}
	if err := mc.Leader(t, 0).Client().Do(ctx(t), add...).Err(); err != nil {
		t.Fatalf("ADDGROUP: %v", err)
	}
	for _, s := range g3 {
		s.Start()
		t.Cleanup(s.Kill)
	}
	grown := &ShardedCluster{Groups: append(slices.Clone(mc.Groups), g3)}
	l3 := grown.Leader(t, 2)
	eventually(t, "group 3 fenced, with the rules", func() bool {
		info, _ := l3.Client().Info(ctx(t), "cluster").Result()
		v, _ := l3.Client().Do(ctx(t), "RL.RULES", "LIST", "mv").Slice()
		return strings.Contains(info, "sluice_slots_epoch:") && len(v) > 0
	})
	node3, _ := g3[0].Client().Do(ctx(t), "CLUSTER", "MYID").Text()
	for g, r := range [][2]int{{0, 2047}, {8192, 10239}} {
		if err := mc.Leader(t, g).Client().Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", r[0], r[1], "NODE", node3).Err(); err != nil {
			t.Fatalf("group %d to group 3: %v", g+1, err)
		}
	}
	waitMigrated(t, mc, 0)
	waitMigrated(t, mc, 1)
	if err := mc.Leader(t, 0).Client().Do(ctx(t), "CLUSTER", "REMOVEGROUP", "g3").Err(); err == nil || !strings.Contains(err.Error(), "owns slots") {
		t.Fatalf("REMOVEGROUP of a group owning slots: %v", err)
	}
	clusterCheck := func(masters int) {
		t.Helper()
		var out []byte
		eventuallyExplained(t, fmt.Sprintf("redis-cli --cluster check passes with %d masters", masters), func() bool {
			host, port, _ := net.SplitHostPort(mc.Groups[0][0].Addr)
			out, _ = exec.Command("redis-cli", "-h", host, "-p", port, "--cluster", "check", mc.Groups[0][0].Addr).CombinedOutput()
			return strings.Contains(string(out), "[OK] All 16384 slots covered.") && !strings.Contains(string(out), "[ERR]") &&
				len(regexp.MustCompile(`M: [0-9a-f]{40} `).FindAll(out, -1)) == masters
		}, func() string { return string(out) })
	}
	clusterCheck(3)
	before := load.calls.Load()
	eventually(t, "calls on the grown cluster", func() bool { return load.calls.Load() > before+300 })
	// Shrink: both ranges home in one command, then the empty group goes.
	node1, _ := mc.Groups[0][0].Client().Do(ctx(t), "CLUSTER", "MYID").Text()
	node2, _ := mc.Groups[1][0].Client().Do(ctx(t), "CLUSTER", "MYID").Text()
	if err := grown.Leader(t, 2).Client().Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, 2047, "NODE", node1,
		"SLOTSRANGE", 8192, 10239, "NODE", node2).Err(); err != nil {
		t.Fatalf("home: %v", err)
	}
	ms := waitMigrated(t, &movingCluster{ShardedCluster: grown}, 2)
	if len(ms) != 2 {
		t.Fatalf("two jobs: %v", ms)
	}
	if err := mc.Leader(t, 1).Client().Do(ctx(t), "CLUSTER", "REMOVEGROUP", "g3").Err(); err != nil {
		t.Fatalf("REMOVEGROUP: %v", err)
	}
	clusterCheck(2)
	load.finish(t, 300, 0, 2047)
	for _, r := range [][2]int{{0, 2047}, {8192, 10239}} {
		if _, n := digestSlots(t, l3.Client(), r[0], r[1]); n != 0 {
			t.Fatalf("group 3 keeps %d counters of %v after moving them home", n, r)
		}
	}
	sameCounters(t, &movingCluster{ShardedCluster: grown})
	t.Logf("%d calls, %d failed", load.calls.Load(), load.fails.Load())
}

// A move is resumable at every step: the source group's driver is held
// right after the cut (the chunk neither group's) or right after the
// import (the target's, not yet confirmed by the source), and then the
// source's leader or the target's leader is killed (SIGKILL). The move
// completes: the counters charged before it keep their counts in the
// target (none admitted again), the target's digest of the slots is the
// source's at the cut, and each group's members agree.
func TestMigrationResumesAtEveryStep(t *testing.T) {
	for _, tc := range []struct{ step, victim string }{
		{"cut", "source"}, {"import", "source"}, {"cut", "target"}, {"import", "target"},
	} {
		t.Run(tc.step+"/"+tc.victim, func(t *testing.T) {
			mc := startMoving(t)
			src, dst := mc.Leader(t, 0), mc.Leader(t, 1)
			cc, keys := spendKeys(t, mc.ShardedCluster, "step:")
			if err := src.Client().Do(ctx(t), "DEBUG", "SLOTMOVE-HOLD", tc.step).Err(); err != nil {
				t.Fatal(err)
			}
			node, _ := mc.Groups[1][0].Client().Do(ctx(t), "CLUSTER", "MYID").Text()
			if err := src.Client().Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, 63, "NODE", node).Err(); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the move held after "+tc.step, func() bool {
				ms := slotMigrations(t, src.Client())
				if len(ms) != 1 || ms[0]["slots_pending"] != "0-63" {
					return false
				}
				info, _ := dst.Client().Info(ctx(t), "cluster").Result()
				imported := strings.Contains(info, "sluice_slots:0-63,")
				return imported == (tc.step == "import")
			})
			want, n := digestSlots(t, src.Client(), 0, 63)
			if n != int64(len(keys)) {
				t.Fatalf("%d counters in slots 0-63 at the cut, want %d", n, len(keys))
			}
			// Mid-move, held, the members agree on every slot's group (the
			// chunk is the source's after the cut — it answers TRYAGAIN —,
			// the target's after the import) and redis-cli reports the
			// migration: the source's slots still to move as migrating, the
			// target's as importing.
			var out []byte
			eventuallyExplained(t, "redis-cli --cluster check passes mid-move and reports it", func() bool {
				host, port, _ := net.SplitHostPort(mc.Groups[1][0].Addr)
				out, _ = exec.Command("redis-cli", "-h", host, "-p", port, "--cluster", "check", mc.Groups[1][0].Addr).CombinedOutput()
				text := string(out)
				return strings.Contains(text, "[OK] All 16384 slots covered.") && strings.Contains(text, "[OK] All nodes agree") &&
					strings.Contains(text, src.Addr+" has slots in migrating state") && strings.Contains(text, dst.Addr+" has slots in importing state")
			}, func() string { return string(out) })
			// While held after the cut, neither group decides for the chunk.
			if tc.step == "cut" {
				for _, s := range []*Server{src, dst} {
					if err := s.Client().Do(ctx(t), "CL.THROTTLE", keys[0], moveLimit-1, 1, 86400).Err(); err == nil ||
						!(strings.HasPrefix(err.Error(), "TRYAGAIN") || strings.HasPrefix(err.Error(), "MOVED")) {
						t.Fatalf("a held chunk decided by %s: %v", s.Addr, err)
					}
				}
			}
			switch tc.victim {
			case "source":
				src.Kill() // the next leader holds nothing: it resumes
			case "target":
				dst.Kill()
				if err := src.Client().Do(ctx(t), "DEBUG", "SLOTMOVE-HOLD", "none").Err(); err != nil {
					t.Fatal(err)
				}
			}
			ms := waitMigrated(t, mc, 0)
			if ms[0]["slots_moved"] != "0-63" || ms[0]["slots_pending"] != "" {
				t.Fatalf("%v", ms[0])
			}
			target := mc.Leader(t, 1)
			if got, k := digestSlots(t, target.Client(), 0, 63); got != want || k != n {
				t.Fatalf("the target holds %s (%d counters), the source held %s (%d) at the cut", got, k, want, n)
			}
			if _, k := digestSlots(t, mc.Leader(t, 0).Client(), 0, 63); k != 0 {
				t.Fatalf("the source keeps %d counters of the moved slots", k)
			}
			sameCounters(t, mc)
			stillSpent(t, cc, keys)
		})
	}
}

// A move survives its source leader cut off from its group (every Raft
// link to and from it through a proxy that stops forwarding) right after a
// cut: the rest of the group elects a leader, which finishes the pending
// chunk and the job; the old leader, healed, follows. Nothing is admitted
// twice, the digests match, each group's members agree.
func TestMigrationSurvivesAPartitionedSourceLeader(t *testing.T) {
	const n = 3
	client := [2][n]string{}
	raft := [2][n]string{}
	for g := range 2 {
		for j := range n {
			client[g][j], raft[g][j] = freeAddr(t), freeAddr(t)
		}
	}
	// proxies[i][j] carries group 1 member i's Raft traffic to member j.
	var proxies [n][n]*netproxy.Proxy
	var b strings.Builder
	b.WriteString("epoch: 1\ngroups:\n")
	for g, slots := range []string{"0-8191", "8192-16383"} {
		var members []string
		for j := range n {
			members = append(members, fmt.Sprintf("g%dn%d: %q", g+1, j+1, client[g][j]+"@"+raft[g][j]))
		}
		fmt.Fprintf(&b, "  - id: g%d\n    slots: [%q]\n    members: {%s}\n", g+1, slots, strings.Join(members, ", "))
	}
	mapPath := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(mapPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := &ShardedCluster{MapPath: mapPath, Groups: make([][]*Server, 2)}
	for g := range 2 {
		for j := range n {
			s := &Server{t: t, Addr: client[g][j], DataDir: t.TempDir()}
			s.Args = []string{"--enable-debug-command", "--data-dir", s.DataDir, "--node-id", fmt.Sprintf("g%dn%d", g+1, j+1), "--cluster-map", mapPath}
			if g == 0 {
				var via []string
				for k := range n {
					if k != j {
						proxies[j][k] = newProxy(t, raft[0][k])
						via = append(via, fmt.Sprintf("g1n%d=%s", k+1, proxies[j][k].Addr()))
					}
				}
				s.Args = append(s.Args, "--raft-dial-via", strings.Join(via, ","))
			}
			sc.Groups[g] = append(sc.Groups[g], s)
		}
	}
	for _, g := range sc.Groups {
		for _, s := range g {
			s.Start()
			t.Cleanup(s.Kill)
		}
	}
	mc := &movingCluster{ShardedCluster: sc}
	src := sc.Leader(t, 0)
	li := slices.Index(sc.Groups[0], src)
	cc, keys := spendKeys(t, sc, "cut:")
	if err := src.Client().Do(ctx(t), "DEBUG", "SLOTMOVE-HOLD", "cut").Err(); err != nil {
		t.Fatal(err)
	}
	node, _ := sc.Groups[1][0].Client().Do(ctx(t), "CLUSTER", "MYID").Text()
	if err := src.Client().Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, 63, "NODE", node).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the move held after the cut", func() bool {
		ms := slotMigrations(t, src.Client())
		return len(ms) == 1 && ms[0]["slots_pending"] == "0-63"
	})
	want, count := digestSlots(t, src.Client(), 0, 63)
	for j := range n {
		if j != li {
			proxies[li][j].Partition()
			proxies[j][li].Partition()
		}
	}
	// The others elect, and their leader (not held) finishes the move.
	var next *Server
	eventually(t, "a new leader of group 1", func() bool {
		for j, s := range sc.Groups[0] {
			if j != li && role(t, s) == "master" {
				next = s
				return true
			}
		}
		return false
	})
	eventually(t, "the new leader finished the move", func() bool {
		ms := slotMigrations(t, next.Client())
		return len(ms) == 1 && ms[0]["state"] == "success" && ms[0]["slots_moved"] == "0-63"
	})
	for j := range n {
		if j != li {
			proxies[li][j].Heal()
			proxies[j][li].Heal()
		}
	}
	if got, k := digestSlots(t, sc.Leader(t, 1).Client(), 0, 63); got != want || k != count {
		t.Fatalf("the target holds %s (%d), the source held %s (%d) at the cut", got, k, want, count)
	}
	sameCounters(t, mc)
	eventually(t, "the healed member has the job's end", func() bool {
		ms := slotMigrations(t, src.Client())
		return len(ms) == 1 && ms[0]["state"] == "success"
	})
	stillSpent(t, cc, keys)
}

// spendKeys waits until both groups of sc are fenced, then uses up the
// CL.THROTTLE limit of five keys of slots 0-63 (named prefix<n>) through a
// ClusterClient, which it returns with the keys.
func spendKeys(t *testing.T, sc *ShardedCluster, prefix string) (*redis.ClusterClient, []string) {
	t.Helper()
	for g := range sc.Groups {
		eventually(t, "the groups fenced", func() bool {
			info, _ := sc.Leader(t, g).Client().Info(ctx(t), "cluster").Result()
			return strings.Contains(info, "sluice_slots_epoch:")
		})
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs(), MaxRedirects: 64,
		MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond})
	t.Cleanup(func() { cc.Close() })
	var keys []string
	for i := 0; len(keys) < 5; i++ {
		if k := prefix + strconv.Itoa(i); slot.Of([]byte(k)) < 64 {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		for range moveLimit {
			if v, err := cc.Do(ctx(t), "CL.THROTTLE", k, moveLimit-1, 1, 86400).Slice(); err != nil || v[0] != int64(0) {
				t.Fatalf("charging %s: %v %v", k, v, err)
			}
		}
	}
	return cc, keys
}

// stillSpent checks, once the client follows the cluster's new leaders,
// that every key spendKeys spent is still refused: its count moved with it.
func stillSpent(t *testing.T, cc *redis.ClusterClient, keys []string) {
	t.Helper()
	eventually(t, "the client follows the new leaders", func() bool {
		cc.ReloadState(ctx(t))
		return cc.Do(ctx(t), "CL.THROTTLE", keys[0], moveLimit-1, 1, 86400, 0).Err() == nil
	})
	for _, k := range keys {
		if v, err := cc.Do(ctx(t), "CL.THROTTLE", k, moveLimit-1, 1, 86400).Slice(); err != nil || v[0] != int64(1) {
			t.Fatalf("%s after the move: %v %v (its %d units were used before it)", k, v, err, moveLimit)
		}
	}
}
