package tests

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/sluice-rl/sluice/internal/netproxy"
	"github.com/sluice-rl/sluice/internal/robust"
	"github.com/sluice-rl/sluice/slot"
)

// The robustness suite (make robustness): traffic against a cluster while
// a seeded nemesis kills, pauses and restarts its members; every call is
// recorded with its invoke and return instants and outcome, and the
// history is checked against the limiter's model (internal/robust) with
// porcupine, per key, ending with a read of what each key has left once
// the faults are healed and the members agree. A failure writes a report
// (the nemesis timeline, the offending key's history as porcupine's
// visualization, the members' logs) and says how to run the seed again.
//
// It runs only when SLUICE_ROBUSTNESS=1 (make robustness sets it): the
// short run CI makes beside the suite, or LONG=1 for as long as
// SLUICE_ROBUSTNESS_DURATION says. SLUICE_ROBUSTNESS_SEED repeats a run,
// SLUICE_ROBUSTNESS_SCENARIO picks one scenario.
func TestRobustness(t *testing.T) {
	if os.Getenv("SLUICE_ROBUSTNESS") != "1" {
		t.Skip("the robustness suite runs with make robustness (SLUICE_ROBUSTNESS=1)")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_ROBUSTNESS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SLUICE_ROBUSTNESS_SEED=%q: %v", s, err)
		}
	}
	duration := 20 * time.Second
	if d := os.Getenv("SLUICE_ROBUSTNESS_DURATION"); d != "" {
		var err error
		if duration, err = time.ParseDuration(d); err != nil {
			t.Fatalf("SLUICE_ROBUSTNESS_DURATION=%q: %v", d, err)
		}
	}
	only := os.Getenv("SLUICE_ROBUSTNESS_SCENARIO")
	for _, sc := range robustnessScenarios {
		if only != "" && only != sc.name {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			t.Logf("seed %d, %s (rerun: make robustness SEED=%d SCENARIO=%s DURATION=%s)", seed, duration, seed, sc.name, duration)
			runRobustness(t, sc, seed, duration)
		})
	}
}

// robustnessScenario is a cluster shape and the faults done to it.
type robustnessScenario struct {
	name string
	// members is a group's size (1: a single node, no --peers).
	members int
	// groups > 1 is a sharded cluster of that many groups (with a
	// cluster secret), slots split evenly.
	groups int
	// faults are the nemesis' actions to draw from.
	faults []fault
	// failpoints are armed in every member (--failpoints; package
	// failpoint): crashes at instants no nemesis from outside can aim at.
	// A member a failpoint crashed is started again.
	failpoints string
	// args are more flags for every member.
	args []string
	// upgrade: the members start as the previous release (built from its
	// commit) and are upgraded to this build one by one under the
	// traffic (and the faults).
	upgrade bool
	// spread divides the counters of the checks, reservations, slots and
	// leases a generation spreads over (1: as many as a single node's
	// traffic spends): a cluster that serves fewer calls must spend its
	// counters' budgets too, or it never refuses.
	spread int
}

// A fault is one of the nemesis' actions.
type fault string

const (
	faultKill        fault = "kill -9 a member, restart it"
	faultKillLeader  fault = "kill -9 a leader, restart it"
	faultPause       fault = "SIGSTOP a member, SIGCONT it"
	faultPauseLeader fault = "SIGSTOP a leader, SIGCONT it"
	faultRestart     fault = "stop a member (SIGTERM), start it"
	faultMove        fault = "move slots to the other group (CLUSTER MIGRATESLOTS)"
	faultTransfer    fault = "hand a group's leadership to another member (RAFT TRANSFER)"
	faultIsolate     fault = "cut a member off from the others, both ways"
	faultOneWay      fault = "drop what a member sends to the others (one way)"
	faultCutGroups   fault = "drop what one group's members send to another group's (one way)"
	faultSlow        fault = "slow a member's links (each chunk held 20-300 ms)"
	faultClock       fault = "step a member's wall clock and hand it the leadership"
)

var robustnessScenarios = []robustnessScenario{
	// One node: a kill -9 loses what the last snapshot had not taken
	// (README: Durability), so it is paused and restarted gracefully.
	{name: "one-node", members: 1, faults: []fault{faultPause, faultRestart}, spread: 1},
	// A member crashes now and then just before or just after it writes
	// Raft entries, or as it closes a snapshot; a log write fails now and
	// then (an fsync error, a full disk).
	{name: "group-of-three", members: 3, faults: []fault{faultKill, faultKillLeader, faultPause, faultPauseLeader, faultRestart, faultTransfer, faultIsolate, faultOneWay, faultSlow, faultClock},
		failpoints: "raftlog-before-append=crash@0.0001,raftlog-after-append=crash@0.0001,raftlog-write=error@0.002,snapshot-before-close=crash@0.1",
		args:       robustSnapshotsOften, spread: 2},
	// Two groups of three: checks and reservations across groups, their
	// coordinators killed and paused, slots moving under them; a
	// coordinator crashes now and then as it is about to give a part back,
	// a moment later (its answer would go out meanwhile, were the answer
	// not to wait for the cancel); log writes and snapshots fail now and
	// then.
	{name: "sharded", members: 3, groups: 2, faults: []fault{faultKill, faultKillLeader, faultPause, faultPauseLeader, faultRestart, faultMove, faultTransfer, faultIsolate, faultOneWay, faultCutGroups, faultSlow, faultGrow, faultClock},
		failpoints: "crossgroup-cancel-part=crash-after-50ms@0.05,raftlog-after-append=crash@0.00005,raftlog-write=error@0.001,snapshot-before-close=error@0.3",
		args:       robustSnapshotsOften, spread: 8},
	// A group of three upgraded member by member from the previous
	// release, killed and paused meanwhile (no failpoints: the previous
	// release has none): its members must apply alike throughout (the log's
	// apply level rises once the last is upgraded, and must), and agree
	// at the end.
	{name: "rolling-upgrade", members: 3, faults: []fault{faultKill, faultKillLeader, faultPause, faultPauseLeader, faultRestart, faultTransfer},
		upgrade: true, args: robustSnapshotsOften, spread: 2},
}

// robustSnapshotsOften has Raft snapshot every few seconds (not every 30 s
// and 16,384 entries), so members restart from snapshots, are sent them,
// and crash or fail while writing them.
var robustSnapshotsOften = []string{"--raft-snapshot-interval", "2s", "--raft-snapshot-threshold", "512"}

// The keys' limit: robustBudget units in a run, then refusals — nothing
// refills within one.
const (
	robustKeys    = 64
	robustBudget  = 151
	robustWorkers = 8
)

// robustFamily is a limiter the traffic calls, as a budget: the command
// that charges a unit of key, and the one that reads what is left
// (a reply's third element either way).
type robustFamily struct {
	prefix       string
	charge, read func(key string) []any
}

var robustFamilies = []robustFamily{
	// GCRA: burst 150 and one a day — 151 in a run.
	{"gcra", func(k string) []any { return []any{"CL.THROTTLE", k, robustBudget - 1, 1, 86400, 1} },
		func(k string) []any { return []any{"CL.THROTTLE", k, robustBudget - 1, 1, 86400, 0} }},
	// The exact sliding log: 151 in the last hour.
	{"sw", func(k string) []any { return []any{"SW.CHECK", k, robustBudget, 3600, "EXACT"} },
		func(k string) []any { return []any{"SW.CHECK", k, robustBudget, 3600, "COST", 0, "EXACT"} }},
	// A fixed window of 30 days (aligned to the epoch: a run crosses a
	// boundary once in 30 days' worth of runs, for a moment).
	{"fw", func(k string) []any { return []any{"FW.CHECK", k, robustBudget, 30 * 86400} },
		func(k string) []any { return []any{"FW.CHECK", k, robustBudget, 30 * 86400, "COST", 0} }},
	// A calendar year's quota (written through to the quota store).
	{"quota", func(k string) []any { return []any{"QUOTA.CHECK", k, robustBudget, "YEAR"} },
		func(k string) []any { return []any{"QUOTA.CHECK", k, robustBudget, "YEAR", "COST", 0} }},
}

// robustKey is key k of generation gen of the traffic: its family's, a
// quarter of the keys each. The keys change every robustGeneration, so a
// run spends budgets all along, and a key's history stays short enough
// for porcupine however long the run.
func robustKey(gen, k int) (string, robustFamily) {
	f := robustFamilies[k%len(robustFamilies)]
	return "robust:" + f.prefix + ":" + strconv.Itoa(gen) + ":" + strconv.Itoa(k), f
}

// The rules the checks and reservations use: a tenant's and a user's
// counter, charged together (all or nothing) — in a sharded cluster often
// in two groups. Neither refills within a run (one a day); the keys a
// call picks change every robustGeneration, so budgets are spent and
// fresh ones started all run long, and refusals by one counter while the
// other admits (whose part must be given back) keep coming.
const (
	robustRules = `domain: robust
descriptors:
  - key: tenant
    rate_limit: {name: per-tenant, unit: day, requests_per_unit: 1, sluice: {algorithm: gcra, burst: 39}}
  - key: user
    rate_limit: {name: per-user, unit: day, requests_per_unit: 1, sluice: {algorithm: gcra, burst: 19}}
  - key: lease
    rate_limit: {name: per-lease, unit: day, requests_per_unit: 1, sluice: {algorithm: gcra, burst: 29}}
`
	robustTenants    = 32
	robustTenantCap  = 40
	robustUsers      = 64
	robustUserCap    = 20
	robustGeneration = 5 * time.Second
)

// robustCounter is a counter of the rules: its descriptor and budget.
type robustCounter struct {
	key, value string
	limit      int64
}

func (c robustCounter) String() string { return c.key + "=" + c.value }

func robustCounters(gen int, tenant, user int) (robustCounter, robustCounter) {
	g := strconv.Itoa(gen)
	return robustCounter{"tenant", "t" + g + "." + strconv.Itoa(tenant), robustTenantCap},
		robustCounter{"user", "u" + g + "." + strconv.Itoa(user), robustUserCap}
}

// robustCluster is the members under test.
type robustCluster struct {
	// mu is held by whoever stops or starts a member: the nemesis for a
	// fault's length, the watcher restarting a member a failpoint crashed.
	mu     sync.Mutex
	nodes  []*Server
	groups [][]*Server
	t      *testing.T
	cl     *Cluster        // a group of three
	sc     *ShardedCluster // a sharded cluster
	// proxies[[2]int{i, j}] carries what member i (of nodes) sends to
	// member j — Raft and member calls — so the nemesis can cut it.
	proxies map[[2]int]*netproxy.Proxy
	// secret is a sharded cluster's --cluster-secret-file; grown counts
	// the groups faultGrow added (their ids follow the first groups').
	secret string
	grown  int
	// clocks are the files each member's wall clock offset is read from
	// (failpoint wall-clock), by member index.
	clocks []string
	// traces are the members' apply traces (failpoint apply-trace), by
	// member index.
	traces []string
}

// failpointArgs arms member i's failpoints: the scenario's, and its wall
// clock read from a file of its own (rc.clocks[i]), which faultClock
// writes.
func (rc *robustCluster) failpointArgs(t *testing.T, sc robustnessScenario, i int) []string {
	if sc.failpoints == "" {
		return nil
	}
	for len(rc.clocks) <= i {
		rc.clocks = append(rc.clocks, "")
	}
	rc.clocks[i] = filepath.Join(t.TempDir(), "clock-offset")
	return []string{"--failpoints", sc.failpoints + ",wall-clock=offset-from-" + rc.clocks[i] + rc.traceArg(t, i)}
}

// dialVia puts a proxy before each other member's Raft address (ids and
// raft by member index) for member i: its --raft-dial-via.
func (rc *robustCluster) dialVia(t *testing.T, i int, ids, raft []string) []string {
	if rc.proxies == nil {
		rc.proxies = map[[2]int]*netproxy.Proxy{}
	}
	var via []string
	for j := range raft {
		if j != i {
			p := newProxy(t, raft[j])
			rc.proxies[[2]int{i, j}] = p
			via = append(via, ids[j]+"="+p.Addr())
		}
	}
	return []string{"--raft-dial-via", strings.Join(via, ",")}
}

// leader is group g's leader once exactly one member says it leads, or
// nil after 30 s. The members are read under mu, a look at a time (a
// member a failpoint crashed is started meanwhile).
func (rc *robustCluster) leader(t *testing.T, g int) *Server {
	if rc.sc == nil && rc.cl == nil {
		return rc.nodes[0]
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var leader *Server
		n := 0
		rc.mu.Lock()
		for _, s := range rc.groups[g] {
			if s.cmd != nil && role(t, s) == "master" {
				leader, n = s, n+1
			}
		}
		rc.mu.Unlock()
		if n == 1 {
			return leader
		}
	}
	t.Logf("group %d has had no one leader for 30 s", g+1)
	return nil
}

// mustLead is leader, failing the test (on its goroutine) without one.
func (rc *robustCluster) mustLead(t *testing.T, g int) *Server {
	l := rc.leader(t, g)
	if l == nil {
		t.Fatalf("group %d has no leader", g+1)
	}
	return l
}

func startRobust(t *testing.T, sc robustnessScenario) *robustCluster {
	rules := writeRules(t, "robust.yaml", robustRules)
	extra := append([]string{"--rules", rules}, sc.args...)
	rc := &robustCluster{t: t}
	switch {
	case sc.groups > 1:
		secret := writeSecret(t, "the robustness suite's cluster secret")
		rc.secret = secret
		var slots [][]string
		per := 16384 / sc.groups
		for g := range sc.groups {
			hi := (g+1)*per - 1
			if g == sc.groups-1 {
				hi = 16383
			}
			slots = append(slots, []string{fmt.Sprintf("%d-%d", g*per, hi)})
		}
		rc.sc = StartShardedClusterVia(t, sc.members, slots, func(g, j int, raft [][]string) []string {
			var ids, addrs []string
			for g2 := range raft {
				for j2 := range raft[g2] {
					ids, addrs = append(ids, fmt.Sprintf("g%dn%d", g2+1, j2+1)), append(addrs, raft[g2][j2])
				}
			}
			return slices.Concat(rc.dialVia(t, g*sc.members+j, ids, addrs), rc.failpointArgs(t, sc, g*sc.members+j), []string{"--grpc-addr", freeAddr(t)})
		}, append(extra, "--cluster-secret-file", secret)...)
		rc.groups = rc.sc.Groups
		rc.nodes = slices.Concat(rc.sc.Groups...)
	case sc.members == 1:
		rc.nodes = []*Server{StartServer(t, slices.Concat(extra, rc.failpointArgs(t, sc, 0), []string{"--grpc-addr", freeAddr(t)})...)}
		rc.groups = [][]*Server{rc.nodes}
	default:
		rc.cl = NewCluster(t, sc.members)
		if sc.upgrade {
			previous := previousRelease(t, os.Getenv("SLUICE_ROBUSTNESS_SCENARIO") == sc.name)
			for i, s := range rc.cl.Nodes {
				// Once upgraded, a member keeps an apply trace (the
				// previous release has none to keep).
				s.bin, s.ThisBuild = previous, []string{"--failpoints", strings.TrimPrefix(rc.traceArg(t, i), ",")}
			}
		}
		rc.cl.Start(func(i int, raft []string) []string {
			var ids []string
			for j := range raft {
				ids = append(ids, fmt.Sprintf("n%d", j+1))
			}
			return slices.Concat(rc.dialVia(t, i, ids, raft), rc.failpointArgs(t, sc, i), []string{"--grpc-addr", freeAddr(t)})
		}, extra...)
		rc.nodes = rc.cl.Nodes
		rc.groups = [][]*Server{rc.nodes}
	}
	// The rules reach each group through its log: no traffic until every
	// group decides by them (a check before would match no limit).
	eventually(t, "every group holds the rules", func() bool {
		for g := range rc.groups {
			if v, _ := rc.mustLead(t, g).Client().Do(ctx(t), "RL.RULES", "LIST", "robust").Slice(); len(v) == 0 {
				return false
			}
		}
		return true
	})
	return rc
}

// robustRecorder is the run's history: single-key calls for porcupine,
// calls of the ledger and holds of slots, the nemesis' timeline.
type robustRecorder struct {
	// groups is the scenario's (1 when it has one log).
	groups  int
	start   time.Time
	mu      sync.Mutex
	history []porcupine.Operation
	ledger  robust.Ledger
	holds   []robust.Hold
	// outcomes counts the ledger's calls by command and outcome (a lease
	// given back in part counts twice: what it kept, what it gave back).
	outcomes   map[string]map[robust.Outcome]int
	anomalies  []string
	timeline   []string
	unexpected sync.Map
	spread     int // robustnessScenario.spread
}

// n is how many of a kind of counter a generation has: base, spread.
func (r *robustRecorder) n(base int) int { return max(1, base/r.spread) }

// slack is a key's robust.Input.Slack: a GCRA key's state is a time, and
// groups' logs keep times that differ (each moves forward to its new
// leader's wall clock, which the nemesis steps by minutes), so in a
// sharded cluster a GCRA key whose slot moves to a group behind reads up
// to one unit more spent for a while. One log keeps one time: no slack.
func (r *robustRecorder) slack(key string) int64 {
	if r.groups > 1 && strings.HasPrefix(key, "robust:gcra:") {
		return 1
	}
	return 0
}

func (r *robustRecorder) now() int64 { return int64(time.Since(r.start)) }

func (r *robustRecorder) op(op porcupine.Operation) {
	r.mu.Lock()
	r.history = append(r.history, op)
	r.mu.Unlock()
}

func (r *robustRecorder) call(c robust.Call) {
	r.mu.Lock()
	r.ledger.Add(c)
	cmd, _, _ := strings.Cut(c.What, " ")
	if r.outcomes == nil {
		r.outcomes = map[string]map[robust.Outcome]int{}
	}
	if r.outcomes[cmd] == nil {
		r.outcomes[cmd] = map[robust.Outcome]int{}
	}
	r.outcomes[cmd][c.Outcome]++
	r.mu.Unlock()
}

func (r *robustRecorder) hold(h robust.Hold) {
	r.mu.Lock()
	r.holds = append(r.holds, h)
	r.mu.Unlock()
}

// anomaly is an answer no correct server gives (a reservation admitted,
// then unknown to its settle).
func (r *robustRecorder) anomaly(format string, args ...any) {
	r.mu.Lock()
	r.anomalies = append(r.anomalies, fmt.Sprintf("%8.3fs ", time.Since(r.start).Seconds())+fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *robustRecorder) note(format string, args ...any) {
	r.mu.Lock()
	r.timeline = append(r.timeline, fmt.Sprintf("%8.3fs ", time.Since(r.start).Seconds())+fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func runRobustness(t *testing.T, sc robustnessScenario, seed uint64, duration time.Duration) {
	rng := rand.New(rand.NewPCG(seed, uint64(len(sc.name))))
	rc := startRobust(t, sc)
	rec := &robustRecorder{start: time.Now(), spread: sc.spread, groups: max(sc.groups, 1)}
	ctxRun, stop := context.WithTimeout(context.Background(), duration)
	defer stop()
	var wg sync.WaitGroup
	for w := range robustWorkers {
		wrng := rand.New(rand.NewPCG(seed, uint64(w)+100))
		wg.Go(func() { robustWorker(ctxRun, w, wrng, rc.nodes, rec) })
	}
	wg.Go(func() { robustNemesis(ctxRun, t, rng, sc, rc, rec) })
	if sc.upgrade {
		wg.Go(func() { robustUpgrade(ctxRun, rc, rec, duration) })
	}
	// The watcher goes on through the heal and the reads: the failpoints
	// stay armed (reads charge nothing, so one retried is harmless).
	ctxWatch, stopWatch := context.WithCancel(context.Background())
	var watching sync.WaitGroup
	watching.Go(func() { robustWatch(ctxWatch, rc, rec) })
	defer func() { stopWatch(); watching.Wait() }()
	wg.Wait()

	// Heal: every member running and not paused, a leader in each group,
	// the same state on a group's members; then what each key has left.
	rc.mu.Lock()
	for _, s := range rc.nodes {
		if s.cmd != nil && s.cmd.Process != nil {
			s.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	rc.mu.Unlock()
	diverged := false
	for g := range rc.groups {
		rc.mustLead(t, g)
		if why := rc.sameDigests(g); why != "" {
			rec.anomaly("group %d's members hold different state a minute after the heal:%s", g+1, why)
			diverged = true
		}
	}
	if sc.upgrade {
		// Every member runs this build now: the group's leader raises the
		// log's apply level to it, or the new behaviour never starts.
		rc.levelRaised(t, rec)
	}
	healed := rec.now()
	reader := robustReader(t, rc)
	gens := int(time.Duration(healed)/robustGeneration) + 1
	for gen := range gens {
		for k := range robustKeys {
			key, f := robustKey(gen, k)
			var v []int64
			readAgain(t, key, func() (err error) {
				v, err = reader.Do(ctx(t), f.read(key)...).Int64Slice()
				return err
			})
			rec.op(porcupine.Operation{ClientId: robustWorkers, Input: robust.Input{Key: key, Remaining: v[2], Slack: rec.slack(key)}, Output: robust.Read,
				Call: rec.now(), Return: rec.now()})
		}
	}
	spent := map[string]int64{}
	rec.ledger.Limits = map[string]int64{}
	// What a counter of the rules has spent: its limit less what an
	// RL.CHECK of no cost finds left.
	readCounter := func(c robustCounter) {
		if _, ok := spent[c.String()]; ok {
			return
		}
		var v []any
		readAgain(t, c.String(), func() (err error) {
			v, err = reader.Do(ctx(t), "RL.CHECK", "robust", "COST", 0, "DESCRIPTOR", c.key, c.value).Slice()
			return err
		})
		spent[c.String()] = c.limit - v[2].(int64)
		rec.ledger.Limits[c.String()] = c.limit
	}
	for gen := range gens {
		for i := range rec.n(robustUsers) {
			tc, uc := robustCounters(gen, i%rec.n(robustTenants), i)
			readCounter(tc)
			readCounter(uc)
		}
	}
	for gen := range gens {
		for k := range rec.n(robustConcKeys) {
			key := robustConcKey(gen, k)
			var v []int64
			readAgain(t, key, func() (err error) {
				v, err = reader.Do(ctx(t), "CONC.GET", key).Int64Slice()
				return err
			})
			spent[key] = v[0]
			rec.ledger.Limits[key] = robustConcLimit
		}
		for k := range rec.n(robustLeaseCounters) {
			readCounter(robustLeaseCounter(gen, k))
		}
	}
	// A call whose outcome is unknown took effect before the members
	// agreed, or never: no entry applies after the heal.
	ops := 0
	history := rec.history
	for i := range history {
		if history[i].Output == robust.Unknown {
			history[i].Return = healed
		}
		if history[i].Output != robust.Read {
			ops++
		}
	}
	rec.unexpected.Range(func(k, v any) bool {
		t.Logf("answers the suite does not classify (taken as unknown): %q ×%d", k, v.(int))
		return true
	})
	model := robust.Budget(robustBudget)
	res, info := porcupine.CheckOperationsVerbose(model, history, max(2*time.Minute, duration/3))
	violations := rec.ledger.Check(spent)
	for i := range rec.holds {
		if rec.holds[i].Until < 0 {
			rec.holds[i].Until = healed
		}
	}
	violations = append(violations, robust.AtOnce(rec.holds, rec.ledger.Limits)...)
	faults := map[string]int{}
	for _, line := range rec.timeline {
		f, _, _ := strings.Cut(strings.TrimSpace(line[9:]), ":")
		switch {
		case slices.Contains(sc.faults, fault(f)), strings.HasPrefix(f, "failpoint crash"), f == "upgrade":
			faults[f]++
		case strings.Contains(line, "given up"):
			faults["steps given up"]++
		}
	}
	if os.Getenv("SLUICE_ROBUSTNESS_TIMELINE") == "1" {
		t.Logf("the nemesis' timeline:\n%s", strings.Join(rec.timeline, "\n"))
	}
	t.Logf("%d single-key calls (%s), %d calls of the ledger (%d violations); faults: %v", ops, res, rec.ledger.Calls(), len(violations), faults)
	injected := map[string]int{}
	for _, s := range rc.nodes {
		for _, line := range strings.Split(s.Logs(), "\n") {
			if _, at, ok := strings.Cut(line, "injected error at "); ok {
				point, _, _ := strings.Cut(at, " ")
				injected[strings.Trim(point, `"\`)]++
			}
			if strings.Contains(line, "the log's time caught up with the wall clock") {
				injected["takeovers that moved the log's time to the wall clock"]++
			}
		}
	}
	if len(injected) > 0 {
		t.Logf("  in the members' logs: %v", injected)
	}
	for _, cmd := range slices.Sorted(maps.Keys(rec.outcomes)) {
		t.Logf("  %s: %v", cmd, rec.outcomes[cmd])
	}
	if res == porcupine.Ok && len(violations) == 0 && len(rec.anomalies) == 0 {
		return
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("sluice-robustness-%s-%d-", sc.name, seed))
	if err != nil {
		t.Fatal(err)
	}
	porcupine.VisualizePath(model, info, filepath.Join(dir, "history.html"))
	os.WriteFile(filepath.Join(dir, "nemesis.txt"), []byte(strings.Join(rec.timeline, "\n")+"\n"), 0o644)
	var summary strings.Builder
	var calls strings.Builder
	var needles []string
	if res != porcupine.Ok {
		// The keys the model rejects, each checked alone: their calls.
		for _, k := range robust.IllegalKeys(model, history, time.Minute) {
			fmt.Fprintf(&summary, "%s: its history is not one the model accepts\n", k)
			key, _, _ := strings.Cut(k, " ")
			fmt.Fprintf(&calls, "%s: not accepted by the model:\n%s", k, robust.KeyHistory(history, key))
			needles = append(needles, key)
		}
	}
	for _, v := range violations {
		fmt.Fprintf(&summary, "%s (%s)\n", v, rec.ledger.Summary(v.Key))
		if _, value, ok := strings.Cut(v.Key, "="); ok {
			needles = append(needles, value) // a descriptor's value: the words name it
		} else {
			needles = append(needles, v.Key)
		}
		fmt.Fprintf(&calls, "%s:\n", v)
		for _, c := range rec.ledger.History(v.Key) {
			fmt.Fprintf(&calls, "  %9.3fs %9.3fs %-11s %v %s\n", time.Duration(c.Call).Seconds(), time.Duration(c.Return).Seconds(), c.Outcome, c.Keys, c.What)
		}
	}
	os.WriteFile(filepath.Join(dir, "calls.txt"), []byte(calls.String()), 0o644)
	for _, a := range rec.anomalies {
		fmt.Fprintf(&summary, "anomaly: %s\n", a)
	}
	os.WriteFile(filepath.Join(dir, "keys.txt"), []byte(summary.String()), 0o644)
	if len(rc.traces) > 0 && len(needles) > 0 {
		files := writeTraces(dir, rc.traces, slices.Compact(slices.Sorted(slices.Values(needles))))
		fmt.Fprintf(&summary, "what the members' logs applied to those keys: %s\n", strings.Join(files, ", "))
	}
	for i, s := range rc.nodes {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("member-%d.log", i+1)), []byte(s.AllLogs()), 0o644)
		if diverged {
			// What each member holds, for a look at where they part.
			exec.Command("cp", "-a", s.DataDir, filepath.Join(dir, fmt.Sprintf("member-%d-data", i+1))).Run()
		}
	}
	t.Fatalf("the history is %s against the limiter's model, %d violations of the ledger, %d anomalies (seed %d): report in %s (history.html, nemesis.txt, keys.txt, calls.txt, apply-*.txt, member logs); rerun: make robustness SEED=%d SCENARIO=%s DURATION=%s\n%s",
		res, len(violations), len(rec.anomalies), seed, dir, seed, sc.name, duration, clip(summary.String(), 8000))
}

// readAgain reads what a key has left after the faults, again while it
// fails (a member a failpoint crashed is being started again; a read
// charges nothing).
func readAgain(t *testing.T, key string, read func() error) {
	t.Helper()
	var err error
	for range 40 {
		if err = read(); err == nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("reading %s after the faults: %v", key, err)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// sameDigests waits until every running member of group g holds the
// same state; if they do not within a minute, it says where they differ.
func (rc *robustCluster) sameDigests(g int) string {
	t := rc.t
	same := func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		d := ""
		for _, s := range rc.groups[g] {
			if s.cmd == nil {
				continue
			}
			got := digestOf(t, s)
			if got == "" || (d != "" && got != d) {
				return false
			}
			d = got
		}
		return true
	}
	// A member a fault left behind catches up from the leader's log or
	// snapshot: a minute, under a long run's state, before it is a
	// divergence.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if same() {
			return ""
		}
	}
	return rc.digestsBySlots(g)
}

// digestsBySlots says where group g's members differ: each one's digest
// and records held, by sixteenths of the slots, and the first slots whose
// digests differ with the keys each member holds there.
func (rc *robustCluster) digestsBySlots(g int) string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var b strings.Builder
	bg := context.Background()
	var clients []*redis.Client
	for _, s := range rc.groups[g] {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, MaxRetries: -1, ReadTimeout: 5 * time.Second})
		defer c.Close()
		clients = append(clients, c)
	}
	slotDigest := func(c *redis.Client, from, to int) string {
		v, _ := c.Do(bg, "DEBUG", "DIGEST-SLOTS", from, to).Slice()
		return fmt.Sprint(v)
	}
	differs := func(from, to int) bool {
		first := slotDigest(clients[0], from, to)
		for _, c := range clients[1:] {
			if slotDigest(c, from, to) != first {
				return true
			}
		}
		return false
	}
	shown := 0
	for r := range 16 {
		if shown >= 8 || !differs(r*1024, r*1024+1023) {
			continue
		}
		for sl := r * 1024; sl < r*1024+1024 && shown < 8; sl++ {
			if !differs(sl, sl) {
				continue
			}
			shown++
			fmt.Fprintf(&b, "\n  slot %d differs:", sl)
			for i, c := range clients {
				keys, _ := c.Do(bg, "CLUSTER", "GETKEYSINSLOT", sl, 20).StringSlice()
				fmt.Fprintf(&b, "\n    %s: %s keys %q", rc.groups[g][i].Addr, slotDigest(c, sl, sl), keys)
			}
		}
	}
	for _, s := range rc.groups[g] {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, MaxRetries: -1, ReadTimeout: 5 * time.Second})
		d, err := c.Do(context.Background(), "DEBUG", "DIGEST").Text()
		status, _ := c.Do(context.Background(), "RAFT", "INFO").Slice()
		applied := any("?")
		for i := 0; i+1 < len(status); i += 2 {
			if status[i] == "applied_index" {
				applied = status[i+1]
			}
		}
		fmt.Fprintf(&b, "\n  %s: %s %v, applied index %v; records by 1024 slots:", s.Addr, d, err, applied)
		for r := range 16 {
			v, _ := c.Do(context.Background(), "DEBUG", "DIGEST-SLOTS", r*1024, r*1024+1023).Slice()
			if len(v) == 2 {
				fmt.Fprintf(&b, " %v", v[1])
			}
		}
		c.Close()
	}
	return b.String()
}

// robustReader reads the final state: a cluster client (it follows MOVED
// to each key's owner).
func robustReader(t *testing.T, rc *robustCluster) redis.UniversalClient {
	if rc.sc != nil {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.sc.Addrs(), MaxRedirects: 16})
		t.Cleanup(func() { c.Close() })
		return c
	}
	if rc.cl != nil {
		return rc.cl.Client() // it follows the leader should it change
	}
	return rc.nodes[0].Client(func(o *redis.Options) { o.MaxRetries = -1 })
}

// robustRoute is a worker's connections: one client per member, and where
// a key (or the checks' domain) was last sent by MOVED.
type robustRoute struct {
	nodes   []*Server
	clients map[string]*redis.Client
	at      map[string]string
	next    int
}

func (r *robustRoute) client(route string) *redis.Client {
	addr := r.at[route]
	if addr == "" {
		addr = r.nodes[r.next].Addr
	}
	c := r.clients[addr]
	if c == nil {
		c = redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, DialTimeout: time.Second,
			ReadTimeout: 2 * time.Second, WriteTimeout: time.Second, PoolSize: 1})
		r.clients[addr] = c
	}
	return c
}

func (r *robustRoute) close() {
	for _, c := range r.clients {
		c.Close()
	}
}

// failed classifies a call's error, and routes the next call of route as
// the error says: to the member MOVED names, or to another member.
func (r *robustRoute) failed(route string, err error, rec *robustRecorder) robust.Outcome {
	msg := err.Error()
	elsewhere := func() {
		delete(r.at, route)
		r.next = (r.next + 1) % len(r.nodes)
		time.Sleep(20 * time.Millisecond) // a leader is being elected: not a hot loop
	}
	switch {
	case strings.HasPrefix(msg, "MOVED "):
		if f := strings.Fields(msg); len(f) == 3 {
			r.at[route] = f[2]
		}
		return robust.NotApplied
	case strings.HasPrefix(msg, "TRYAGAIN"), strings.HasPrefix(msg, "LOADING"):
		time.Sleep(20 * time.Millisecond)
		return robust.NotApplied
	case strings.HasPrefix(msg, "CLUSTERDOWN"):
		elsewhere()
		return robust.NotApplied
	case strings.HasPrefix(msg, "ERR the outcome is unknown"), strings.HasPrefix(msg, "ERR the reservation was settled in part"):
		return robust.Unknown
	}
	var dial *net.OpError
	if errors.As(err, &dial) && dial.Op == "dial" {
		// Never sent: nothing applied (counted unknown, it would hide a
		// charge of the same key behind it).
		elsewhere()
		return robust.NotApplied
	}
	var redisErr redis.Error
	if errors.As(err, &redisErr) {
		n, _ := rec.unexpected.LoadOrStore(firstWords(msg), 0)
		rec.unexpected.Store(firstWords(msg), n.(int)+1)
	}
	elsewhere() // no answer: another member, after a moment
	return robust.Unknown
}

// robustWorker makes calls until ctx ends, with no retries (a retry would
// hide an outcome): two in five charge a key of a single-key family; the
// rest check a tenant's and a user's counter together (RL.CHECK, and
// ShouldRateLimit at a gRPC door), reserve both (settled or cancelled),
// acquire concurrency slots (released or kept) and lease buckets (part of
// each lease given back).
func robustWorker(ctx context.Context, id int, rng *rand.Rand, nodes []*Server, rec *robustRecorder) {
	r := &robustRoute{nodes: nodes, clients: map[string]*redis.Client{}, at: map[string]string{}, next: rng.IntN(len(nodes))}
	defer r.close()
	g := &robustGRPC{conns: map[string]*grpc.ClientConn{}}
	defer g.close()
	for n := 0; ctx.Err() == nil; n++ {
		switch p := rng.IntN(20); {
		case p < 8:
			robustSingle(r, id, rng, rec)
		case p < 12:
			robustCheck(r, id, rng, rec)
		case p < 14:
			robustShouldRateLimit(r, g, id, rng, rec)
		case p < 17:
			robustReserve(r, id, n, rng, rec)
		case p < 19:
			robustConc(r, id, n, rng, rec)
		default:
			robustLease(r, id, n, rng, rec)
		}
	}
}

// robustSingle charges a unit of a single-key family's key, or one time
// in eight reads what the key has left.
func robustSingle(r *robustRoute, id int, rng *rand.Rand, rec *robustRecorder) {
	key, f := robustKey(int(time.Since(rec.start)/robustGeneration), rng.IntN(robustKeys))
	call := rec.now()
	if rng.IntN(8) == 0 {
		// A read of what is left (a cost of 0): it must see every charge
		// answered before it, and none that is not linearized before it
		// (a member answering from a state behind the log's).
		v, err := r.client(key).Do(context.Background(), f.read(key)...).Int64Slice()
		if err != nil {
			r.failed(key, err, rec)
			return // a read that failed changed nothing
		}
		if len(v) == 5 {
			rec.op(porcupine.Operation{ClientId: id, Input: robust.Input{Key: key, Remaining: v[2], Slack: rec.slack(key)}, Output: robust.Read, Call: call, Return: rec.now()})
		}
		return
	}
	v, err := r.client(key).Do(context.Background(), f.charge(key)...).Int64Slice()
	ret := rec.now()
	out := robust.Unknown
	switch {
	case err != nil:
		out = r.failed(key, err, rec)
	case len(v) == 5 && v[0] == 0:
		out = robust.Admitted
	case len(v) == 5 && v[0] == 1:
		out = robust.Refused
	}
	rec.op(porcupine.Operation{ClientId: id, Input: robust.Input{Key: key, Units: 1, Slack: rec.slack(key)}, Call: call, Output: out, Return: ret})
}

// robustPair picks a tenant's and a user's counter of the current
// generation.
func robustPair(rng *rand.Rand, rec *robustRecorder) []robustCounter {
	gen := int(time.Since(rec.start) / robustGeneration)
	tc, uc := robustCounters(gen, rng.IntN(rec.n(robustTenants)), rng.IntN(rec.n(robustUsers)))
	return []robustCounter{tc, uc}
}

func robustDescriptors(cs []robustCounter) []any {
	var out []any
	for _, c := range cs {
		out = append(out, "DESCRIPTOR", c.key, c.value)
	}
	return out
}

func robustKeysOf(cs []robustCounter) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.String())
	}
	return out
}

// checkOutcome reads an RL.CHECK or RL.RESERVE reply (one that matched
// no limit, limit -1, is not an answer of these rules: unknown).
func checkOutcome(v []any) robust.Outcome {
	if len(v) >= 5 && v[1] != int64(-1) {
		switch v[0] {
		case int64(0):
			return robust.Admitted
		case int64(1):
			return robust.Refused
		}
	}
	return robust.Unknown
}

// robustCheck is an RL.CHECK of a tenant's and a user's counter.
func robustCheck(r *robustRoute, id int, rng *rand.Rand, rec *robustRecorder) {
	cs := robustPair(rng, rec)
	call := robust.Call{Keys: robustKeysOf(cs), Units: 1, Call: rec.now()}
	to := r.client("robust")
	v, err := to.Do(context.Background(), append([]any{"RL.CHECK", "robust"}, robustDescriptors(cs)...)...).Slice()
	call.Return = rec.now()
	call.Outcome = checkOutcome(v)
	if err != nil {
		call.Outcome = r.failed("robust", err, rec)
	}
	call.What = fmt.Sprintf("RL.CHECK by worker %d at %s: %s", id, to.Options().Addr, answer(v, err))
	rec.call(call)
}

// robustReserve reserves a unit of a tenant's and a user's counter and, if
// admitted, settles it at 1 (the charge stays whatever the settle does) or
// cancels it (given back once a cancel is answered).
func robustReserve(r *robustRoute, id, n int, rng *rand.Rand, rec *robustRecorder) {
	cs := robustPair(rng, rec)
	rid := fmt.Sprintf("w%d-%d-%d", id, n, rng.Uint32())
	call := robust.Call{Keys: robustKeysOf(cs), Units: 1, Call: rec.now()}
	to := r.client("robust")
	v, err := to.Do(context.Background(), append([]any{"RL.RESERVE", "robust", rid, 3600}, robustDescriptors(cs)...)...).Slice()
	call.Return = rec.now()
	call.What = fmt.Sprintf("RL.RESERVE %s by worker %d at %s: %s", rid, id, to.Options().Addr, answer(v, err))
	call.Outcome = checkOutcome(v)
	if err != nil {
		call.Outcome = r.failed("robust", err, rec)
	}
	if call.Outcome != robust.Admitted {
		rec.call(call)
		return
	}
	settle := []any{"RL.SETTLE", "robust", rid, 1}
	cancel := rng.IntN(2) == 0
	if cancel {
		settle = []any{"RL.CANCEL", "robust", rid}
	}
	// Sent again while nothing was applied, or the outcome is unknown: a
	// settle of a reservation already settled answers nil.
	unknown, failed := false, false
	for range 20 {
		to := r.client("robust")
		rows, err := to.Do(context.Background(), settle...).Slice()
		call.Return = rec.now()
		call.What += fmt.Sprintf("; %s at %s: %s", settle[0], to.Options().Addr, answer(rows, err))
		if err != nil && err != redis.Nil {
			failed = true
			if r.failed("robust", err, rec) == robust.Unknown {
				unknown = true
			}
			continue
		}
		switch {
		case err == redis.Nil && !unknown:
			rec.anomaly("%s: admitted, then unknown to its %s", call.What, settle[0])
		case err == redis.Nil || len(rows) == 2 || failed:
			// Settled now, or by an attempt whose answer was lost, or that
			// failed in one group (the groups it reached answer nothing
			// again: the rows are the rest's).
			if cancel {
				call.Outcome = robust.Returned // given back: nothing charged
			}
		default:
			rec.anomaly("%s: %s answered %v", call.What, settle[0], rows)
		}
		rec.call(call)
		return
	}
	// Never answered: a cancel may or may not have given the unit back; a
	// settle at the reserved cost keeps the charge either way, and so does
	// a reservation no cancel reached (until its ttl, an hour).
	if cancel && unknown {
		call.Outcome = robust.Unknown
	}
	rec.call(call)
}

// answer is a reply for a report: its error's first words, or its value.
func answer(v any, err error) string {
	if err != nil {
		return firstWords(err.Error())
	}
	return fmt.Sprint(v)
}

// robustNemesis draws a fault from the scenario's every 1 to 3 seconds
// until ctx ends, at most one member down or paused at a time, and heals
// each before the next.
func robustNemesis(ctx context.Context, t *testing.T, rng *rand.Rand, sc robustnessScenario, rc *robustCluster, rec *robustRecorder) {
	wait := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	for wait(time.Duration(1000+rng.IntN(2000)) * time.Millisecond) {
		f := sc.faults[rng.IntN(len(sc.faults))]
		if f == faultMove {
			robustMove(t, rng, rc, rec)
			continue
		}
		if f == faultTransfer {
			robustTransfer(t, rng, rc, rec)
			continue
		}
		if f == faultGrow {
			robustGrow(t, rng, rc, rec)
			continue
		}
		if f == faultClock {
			robustClock(t, rng, rc, rec, wait)
			continue
		}
		if f == faultIsolate || f == faultOneWay || f == faultCutGroups || f == faultSlow {
			robustCut(t, f, rng, rc, rec, wait)
			continue
		}
		// The victim is chosen before the lock: waiting for a group's
		// leader must not keep the watcher from starting what crashed.
		g := rng.IntN(len(rc.groups))
		var s *Server
		switch f {
		case faultKillLeader, faultPauseLeader:
			if s = rc.leader(t, g); s == nil {
				continue
			}
		default:
			s = rc.groups[g][rng.IntN(len(rc.groups[g]))]
		}
		down := time.Duration(300+rng.IntN(1500)) * time.Millisecond
		func() {
			rc.mu.Lock()
			defer rc.mu.Unlock() // held by no goroutine that is gone
			robustFault(f, s, down, rec, wait)
		}()
	}
}

// robustFault does fault f to member s for down, and heals it.
func robustFault(f fault, s *Server, down time.Duration, rec *robustRecorder, wait func(time.Duration) bool) {
	rec.note("%s: %s for %s", f, s.Addr, down)
	switch f {
	case faultKill, faultKillLeader:
		s.Kill()
		wait(down)
		robustStart(s, rec)
	case faultPause, faultPauseLeader:
		if s.cmd != nil {
			s.cmd.Process.Signal(syscall.SIGSTOP)
			wait(down)
			s.cmd.Process.Signal(syscall.SIGCONT)
		}
	case faultRestart:
		robustStop(s, rec)
		wait(down)
		robustStart(s, rec)
	}
	rec.note("healed %s", s.Addr)
}

// robustWatch starts again, until ctx ends, each member a failpoint
// crashed (not one the nemesis is stopping).
func robustWatch(ctx context.Context, rc *robustCluster, rec *robustRecorder) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		robustRestartCrashed(rc, rec)
	}
}

// robustRestartCrashed starts each member whose process exited though no
// one stopped it.
func robustRestartCrashed(rc *robustCluster, rec *robustRecorder) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, s := range rc.nodes {
		if s.cmd == nil {
			continue
		}
		select {
		case <-s.exited:
			point := "?"
			if logs := s.Logs(); strings.Contains(logs, "failpoint ") {
				point = logs[strings.LastIndex(logs, "failpoint ")+len("failpoint "):]
				point, _, _ = strings.Cut(point, ":")
			}
			rec.note("failpoint crash at %s: %s", point, s.Addr)
			s.cmd = nil
			robustStart(s, rec)
			rec.note("healed %s", s.Addr)
		default:
		}
	}
}

// robustStop stops s gracefully (SIGTERM), or kills it after 30 s — and
// says so — without failing the test off its goroutine.
func robustStop(s *Server, rec *robustRecorder) {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		s.cmd = nil
	case <-time.After(30 * time.Second):
		rec.anomaly("%s did not stop on SIGTERM within 30 s: killed", s.Addr)
		s.Kill()
	}
}

// robustStart starts s again; one that does not get ready (a failpoint
// crashed it on its way up) is noted, and the watcher starts it again.
func robustStart(s *Server, rec *robustRecorder) {
	if err := s.TryStart(); err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		rec.note("start %s: %s", s.Addr, first)
	}
}

// robustTransfer has a group's leader hand its leadership to another
// member (RAFT TRANSFER), as an operator does before maintenance: every
// call in flight at the old leader is answered or said unknown.
func robustTransfer(t *testing.T, rng *rand.Rand, rc *robustCluster, rec *robustRecorder) {
	g := rng.IntN(len(rc.groups))
	l := rc.leader(t, g)
	if l == nil {
		return
	}
	err := robustDo(l, "RAFT", "TRANSFER").Err()
	rec.note("%s: from %s (%v)", faultTransfer, l.Addr, err)
}

// robustClock steps a member's wall clock by up to ten minutes (ahead
// three times in four) and has its group's leader hand it the leadership,
// so it reads that clock as it takes over (a log behind a new leader's
// wall clock is moved forward to it: README, "Time comes from the log");
// after 1 to 5 s its clock is right again. The suite's budgets refill over
// days, so ten minutes more moves none of them: what it checks is that a
// stepped clock costs no admission, charge or replica.
func robustClock(t *testing.T, rng *rand.Rand, rc *robustCluster, rec *robustRecorder, wait func(time.Duration) bool) {
	g := rng.IntN(len(rc.groups))
	j := rng.IntN(len(rc.groups[g]))
	victim := rc.groups[g][j]
	file := rc.clocks[slices.Index(rc.nodes, victim)]
	step := time.Duration(1+rng.IntN(600)) * time.Second
	if rng.IntN(4) == 0 {
		step = -step
	}
	id := fmt.Sprintf("n%d", j+1)
	if rc.sc != nil {
		id = fmt.Sprintf("g%dn%d", g+1, j+1)
	}
	rec.note("%s: %s (%s) by %s", faultClock, victim.Addr, id, step)
	os.WriteFile(file, []byte(step.String()), 0o644)
	defer func() {
		os.WriteFile(file, nil, 0o644)
		rec.note("healed %s", victim.Addr)
	}()
	if l := rc.leader(t, g); l != nil && l != victim {
		err := robustDo(l, "RAFT", "TRANSFER", id).Err()
		rec.note("RAFT TRANSFER %s at %s: %v", id, l.Addr, err)
	}
	wait(time.Duration(1000+rng.IntN(4000)) * time.Millisecond)
}

// robustCut stops the proxies fault f names for 0.5 to 4 s, then heals
// them: a member (the leader, one time in two) cut off both ways or
// unable to send to the others, or a group unable to send to another; or
// slows a member's links for 1 to 5 s.
func robustCut(t *testing.T, f fault, rng *rand.Rand, rc *robustCluster, rec *robustRecorder, wait func(time.Duration) bool) {
	g := rng.IntN(len(rc.groups))
	victim := rc.groups[g][rng.IntN(len(rc.groups[g]))]
	if rng.IntN(2) == 0 {
		if l := rc.leader(t, g); l != nil {
			victim = l
		}
	}
	from := map[int]bool{slices.Index(rc.nodes, victim): true}
	what := victim.Addr
	if f == faultCutGroups {
		to := (g + 1 + rng.IntN(len(rc.groups)-1)) % len(rc.groups)
		clear(from)
		for _, s := range rc.groups[g] {
			from[slices.Index(rc.nodes, s)] = true
		}
		what = fmt.Sprintf("g%d to g%d", g+1, to+1)
		var cut []*netproxy.Proxy
		for pair, p := range rc.proxies {
			if from[pair[0]] && slices.Contains(rc.groups[to], rc.nodes[pair[1]]) {
				cut = append(cut, p)
			}
		}
		robustCutFor(cut, time.Duration(500+rng.IntN(3500))*time.Millisecond, f, what, rec, wait)
		return
	}
	var cut []*netproxy.Proxy
	for pair, p := range rc.proxies {
		if from[pair[0]] || ((f == faultIsolate || f == faultSlow) && from[pair[1]]) {
			cut = append(cut, p)
		}
	}
	if f == faultSlow {
		delay := time.Duration(20+rng.IntN(280)) * time.Millisecond
		down := time.Duration(1000+rng.IntN(4000)) * time.Millisecond
		rec.note("%s: %s, %s for %s", f, what, delay, down)
		for _, p := range cut {
			p.SetDelay(delay)
		}
		wait(down)
		for _, p := range cut {
			p.SetDelay(0)
		}
		rec.note("healed %s", what)
		return
	}
	robustCutFor(cut, time.Duration(500+rng.IntN(3500))*time.Millisecond, f, what, rec, wait)
}

// robustCutFor partitions the proxies for down (or until the run ends),
// then heals them.
func robustCutFor(cut []*netproxy.Proxy, down time.Duration, f fault, what string, rec *robustRecorder, wait func(time.Duration) bool) {
	rec.note("%s: %s for %s", f, what, down)
	for _, p := range cut {
		p.Partition()
	}
	defer func() {
		for _, p := range cut {
			p.Heal()
		}
		rec.note("healed %s", what)
	}()
	wait(down)
}

// robustMigrations is CLUSTER GETSLOTMIGRATIONS at c, or nil when it does
// not answer (its member crashed or paused meanwhile).
func robustMigrations(c *redis.Client) []migration {
	defer c.Close()
	v, err := c.Do(context.Background(), "CLUSTER", "GETSLOTMIGRATIONS").Slice()
	if err != nil {
		return nil
	}
	var out []migration
	for _, e := range v {
		m := migration{}
		if f, ok := e.([]any); ok {
			for i := 0; i+1 < len(f); i += 2 {
				m[fmt.Sprint(f[i])] = f[i+1]
			}
		}
		out = append(out, m)
	}
	return out
}

// robustMove moves a random range of 256 slots from whichever group owns
// it to another, through the owner's leader, and waits for the move to
// end (it keeps going under the traffic).
func robustMove(t *testing.T, rng *rand.Rand, rc *robustCluster, rec *robustRecorder) {
	lo := rng.IntN(64) * 256
	// The owner: the group whose leader answers a key of the slot
	// without MOVED.
	tag := slot.Tag(lo)
	key := "{" + string(tag[:]) + "}"
	src := -1
	for g := range rc.groups {
		if l := rc.leader(t, g); l != nil && robustDo(l, "CL.THROTTLE", key, 1, 1, 1, 0).Err() == nil {
			src = g
		}
	}
	if src < 0 {
		rec.note("%s: no owner of %d-%d answered; skipped", faultMove, lo, lo+255)
		return
	}
	dst := (src + 1 + rng.IntN(len(rc.groups)-1)) % len(rc.groups)
	nodeID, err := robustNodeID(rc.groups[dst][0])
	if err != nil {
		rec.note("%s: CLUSTER MYID: %v; skipped", faultMove, err)
		return
	}
	leader := rc.leader(t, src)
	if leader == nil {
		return
	}
	rec.note("%s: %d-%d from g%d to g%d", faultMove, lo, lo+255, src+1, dst+1)
	if err := robustDo(leader, "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", lo, lo+255, "NODE", nodeID).Err(); err != nil {
		rec.note("MIGRATESLOTS refused (%v)", err)
		return
	}
	robustAwaitMove(t, rc, rec, src, lo, fmt.Sprintf("g%d", dst+1))
}

// firstWords is an error's first few words, to count unclassified ones.
func firstWords(msg string) string {
	f := strings.Fields(msg)
	return strings.Join(f[:min(len(f), 6)], " ")
}
