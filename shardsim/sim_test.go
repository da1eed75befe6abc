package shardsim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// The limits cannot refill while a run lasts (a day's worth each), so
// every count is exact.
const (
	endpointLimit = 20
	userLimit     = 10
	throttleBurst = 50
	simRules      = `domain: x
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: day, requests_per_unit: 10, sluice: {algorithm: gcra, burst: 9}}
  - key: endpoint
    rate_limit: {name: per-endpoint, unit: day, requests_per_unit: 20, sluice: {algorithm: gcra, burst: 19}}
`
)

func TestSimulated10Groups(t *testing.T) {
	simulate(t, run{groups: 10, callers: 8, ops: 1200, cuts: 3, moves: 6, users: 60, endpoints: 12, keys: 150})
}

func TestSimulated100Groups(t *testing.T) {
	simulate(t, run{groups: 100, callers: 8, ops: 1200, cuts: 4, users: 120, endpoints: 16, keys: 300})
}

// run is a simulation's shape: how many groups, callers and operations,
// leaders cut off during it, and the users, endpoints and throttled keys
// the operations pick from.
type run struct {
	groups, callers, ops, cuts, moves int
	users, endpoints, keys            int
}

// tally is what clients saw of one counter: admitted, and answers whose
// outcome is unknown (it may have been charged).
type tally struct{ admitted, unknown atomic.Int64 }

// simulate drives a cluster of r.groups with random faults — calls between
// members lost before or after they apply (2% each), leaders cut off from
// their groups — with RL.CHECKs over users and endpoints whose counters
// sit in different groups and CL.THROTTLEs routed by key, then checks:
// every counter lives in the group owning its slot only, every group's
// members hold one state, nothing was admitted past a limit, and each
// counter holds what was admitted, plus at most the unknown outcomes and
// the lost keeps and cancels (whose reservations keep their charge).
func simulate(t *testing.T, r run) {
	if testing.Short() {
		t.Skip("-short: the simulation starts hundreds of Raft members")
	}
	start := time.Now()
	c, err := Start(Config{Groups: r.groups, Dir: t.TempDir(), Unsent: 20_000, Lost: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Logf("%d groups of 3 serving after %s", r.groups, time.Since(start).Round(time.Millisecond))
	termsAtStart := c.terms()
	// A guard against a run that hangs, not a measure of speed: as long as
	// three starts of the cluster took here (a loaded machine is slower at
	// both; 1208 of the 100 groups' ops were done after 90 s once, while a
	// long robustness run shared the two cores), and at least 90 s.
	ctx, cancel := context.WithTimeout(context.Background(), max(90*time.Second, 3*time.Since(start)))
	defer cancel()
	rng := rand.New(rand.NewPCG(uint64(r.groups), 1))
	// The rules, through one member: its group applies them, then every
	// other group (dropped calls: sent again until every group has them).
	for {
		if _, err := c.Route(ctx, rng, "RL.RULES", "LOAD", "x.yaml", simRules); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("rules not loaded: %v", err)
		}
	}

	users := make([]tally, r.users)
	endpoints := make([]tally, r.endpoints)
	throttled := make([]tally, r.keys)
	var checks, admitted, failed atomic.Int64
	var ops atomic.Int64
	var wg sync.WaitGroup
	for w := range r.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for ops.Add(1) <= int64(r.ops) {
				if rng.IntN(10) < 4 {
					k := rng.IntN(r.keys)
					v, err := c.Route(ctx, rng, "CL.THROTTLE", "k"+strconv.Itoa(k), strconv.Itoa(throttleBurst-1), "1", "86400", "1")
					switch outcome(v, err) {
					case admittedOutcome:
						throttled[k].admitted.Add(1)
					case unknownOutcome:
						throttled[k].unknown.Add(1)
					}
					continue
				}
				u, e := rng.IntN(r.users), rng.IntN(r.endpoints)
				checks.Add(1)
				v, err := c.Route(ctx, rng, "RL.CHECK", "x", "DESCRIPTOR", "user", "u"+strconv.Itoa(u), "DESCRIPTOR", "endpoint", "e"+strconv.Itoa(e))
				switch outcome(v, err) {
				case admittedOutcome:
					admitted.Add(1)
					users[u].admitted.Add(1)
					endpoints[e].admitted.Add(1)
				case unknownOutcome:
					failed.Add(1)
					users[u].unknown.Add(1)
					endpoints[e].unknown.Add(1)
				}
			}
		}()
	}
	// Slots moving between groups while the callers run: a range of group
	// i's goes to group i+1, through lossy calls and cut-off leaders.
	var moved sync.WaitGroup
	for i := range r.moves {
		moved.Add(1)
		go func() {
			defer moved.Done()
			time.Sleep(time.Duration(i) * 300 * time.Millisecond)
			g := i % r.groups
			from := g * slot.Count / r.groups
			lo := from + 500*(i/r.groups)
			target := c.Map.Groups[(g+1)%r.groups].Members[0].ID
			for ctx.Err() == nil {
				l := c.Leader(g)
				if l != nil {
					_, err := l.Do("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(lo+400), "NODE", target)
					if err == nil {
						return
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	// Leaders cut off from their groups while the callers run.
	var cuts sync.WaitGroup
	for i := range r.cuts {
		cuts.Add(1)
		go func() {
			defer cuts.Done()
			time.Sleep(time.Duration(i) * 700 * time.Millisecond)
			c.Cut(rng2(i).IntN(r.groups), 1500*time.Millisecond)
		}()
	}
	wg.Wait()
	cuts.Wait()
	moved.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the run did not finish in time (%d ops)", ops.Load())
	}
	elections := c.terms() - termsAtStart
	t.Logf("%d ops in %s: %d checks (%d admitted, %d failed or unknown), %d calls dropped before sending, %d after applying, %d elections",
		r.ops, time.Since(start).Round(time.Millisecond), checks.Load(), admitted.Load(), failed.Load(), c.Unsent.Load(), c.Lost.Load(), elections)
	if elections == 0 && r.cuts > 0 {
		t.Errorf("no election happened: the cuts proved nothing")
	}

	// Quiet: no more faults; every keep and cancel finished.
	c.SetFaults(0, 0)
	if err := c.waitServing(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	var lostFinishes int64
	for _, m := range c.Members {
		m.Coord.Drain()
		lostFinishes += m.Coord.Counts().Lost
	}
	// Every migration ended, in success; each slot is owned by exactly one
	// group's log.
	owner := c.waitMoved(t, r.moves)
	var chunks, movedKeys int64
	for _, m := range c.Members {
		st := m.Moves.Stats()
		chunks += st.Chunks
		movedKeys += st.Keys
	}
	t.Logf("%d migrations: %d chunks, %d counters moved", r.moves, chunks, movedKeys)
	if r.moves > 0 && movedKeys == 0 {
		t.Fatal("the migrations moved no counter: they prove nothing")
	}

	// Fencing: a counter exists only in the group that owns its slot.
	for _, m := range c.Members {
		view := m.Env.Machine.Keys()
		now := m.Env.Machine.Applied()
		for s := range slot.Count {
			rs := view.Read(s)
			rs.Keys(now, func(key []byte, e keyspace.Entry) bool {
				switch e.Kind() {
				case keyspace.KindRules, keyspace.KindOverride, keyspace.KindScale, keyspace.KindReservation, keyspace.KindOwnership:
					return true // configuration, and parts' reservations, are kept in every group
				}
				if owner[s] != m.Group {
					t.Errorf("member %s (group %d) holds %q of slot %d, group %d's", m.ID, m.Group+1, key, s, owner[s]+1)
				}
				return true
			})
			rs.Unlock()
		}
	}
	// Every group's members converge on one state.
	for g, idx := range c.Groups {
		var last string
		deadline := time.Now().Add(20 * time.Second)
		for {
			same := true
			last = ""
			for _, i := range idx {
				d, err := c.Members[i].Env.Machine.Digest()
				if err != nil {
					t.Fatal(err)
				}
				if last != "" && d != last {
					same = false
				}
				last = d
			}
			if same {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %d's members hold different states", g+1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Nothing past a limit; each counter holds what was admitted, plus at
	// most what is unknown and what lost keeps and cancels still hold. The
	// reads get a deadline of their own: the traffic's may have passed on a
	// loaded machine, and a read of a group still electing waits for it
	// (CLUSTERDOWN, retried) instead of failing at once.
	readCtx, cancelReads := context.WithTimeout(context.Background(), max(60*time.Second, time.Since(start)))
	defer cancelReads()
	used := func(desc string, i, limit int) int64 {
		v, err := c.Route(readCtx, rng, "RL.CHECK", "x", "COST", "0", "DESCRIPTOR", desc, desc[:1]+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("reading %s %d: %v", desc, i, err)
		}
		return int64(limit) - v.([]any)[2].(int64)
	}
	check := func(what string, tl []tally, limit int, read func(i int) int64) {
		for i := range tl {
			a, u := tl[i].admitted.Load(), tl[i].unknown.Load()
			if a > int64(limit) {
				t.Errorf("%s %d: %d admitted on a limit of %d", what, i, a, limit)
			}
			got := read(i)
			if got < a || got > min(a+u+lostFinishes, int64(limit)) {
				t.Errorf("%s %d holds %d: %d admitted, %d unknown, %d cancels lost", what, i, got, a, u, lostFinishes)
			}
		}
	}
	check("user", users, userLimit, func(i int) int64 { return used("user", i, userLimit) })
	check("endpoint", endpoints, endpointLimit, func(i int) int64 { return used("endpoint", i, endpointLimit) })
	check("key", throttled, throttleBurst, func(i int) int64 {
		v, err := c.Route(readCtx, rng, "CL.THROTTLE", "k"+strconv.Itoa(i), strconv.Itoa(throttleBurst-1), "1", "86400", "0")
		if err != nil {
			t.Fatalf("reading key %d: %v", i, err)
		}
		return throttleBurst - v.([]any)[2].(int64)
	})
	if admitted.Load() == 0 || checks.Load() == admitted.Load() {
		t.Fatalf("%d of %d checks admitted: the run proves nothing", admitted.Load(), checks.Load())
	}
	t.Logf("checked in %s (%d cancels lost)", time.Since(start).Round(time.Millisecond), lostFinishes)
}

// waitMoved waits until every group's migrations ended (there must be
// moves of them), checks each succeeded, and returns each slot's owner
// group as the groups' logs say — exactly one each.
func (c *Cluster) waitMoved(t *testing.T, moves int) [slot.Count]int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		jobs, running := 0, 0
		for g := range c.Groups {
			l := c.Leader(g)
			if l == nil {
				running++
				continue
			}
			for _, j := range l.Env.Machine.Owned().Jobs {
				jobs++
				if j.State == "running" {
					running++
				} else if j.State != "success" {
					t.Fatalf("group %d's migration %+v", g+1, j)
				}
			}
		}
		if running == 0 && jobs == moves {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d migrations running after 30 s", running, jobs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var owner [slot.Count]int
	for s := range owner {
		owner[s] = -1
	}
	for g := range c.Groups {
		o := c.Leader(g).Env.Machine.Owned()
		for s := range slot.Count {
			if o.Owns(s) {
				if owner[s] >= 0 {
					t.Fatalf("slot %d owned by groups %d and %d", s, owner[s]+1, g+1)
				}
				owner[s] = g
			}
		}
	}
	for s, g := range owner {
		if g < 0 {
			t.Fatalf("slot %d owned by no group", s)
		}
	}
	return owner
}

// terms is the sum of every group's highest Raft term: it grows by one
// for each election.
func (c *Cluster) terms() (n int64) {
	for _, idx := range c.Groups {
		var high uint64
		for _, i := range idx {
			high = max(high, c.Members[i].Node.Status().Term)
		}
		n += int64(high)
	}
	return n
}

func rng2(i int) *rand.Rand { return rand.New(rand.NewPCG(uint64(i), 3)) }

const (
	admittedOutcome = iota
	refusedOutcome
	unknownOutcome
)

// outcome classifies a limiter's reply: admitted, refused (by a limit, or
// an error that says nothing was done), or unknown.
func outcome(v any, err error) int {
	if err != nil {
		var e resp.ReplyError
		if errors.As(err, &e) && (strings.HasPrefix(string(e), "TRYAGAIN") || strings.HasPrefix(string(e), "CLUSTERDOWN")) {
			return refusedOutcome // nothing was logged, or its parts were given back
		}
		return unknownOutcome
	}
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		panic(fmt.Sprintf("a reply of another shape: %v", v))
	}
	if arr[0] == int64(0) {
		return admittedOutcome
	}
	return refusedOutcome
}
