package rls

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/internal/quotaplane"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/resp"
)

// simLog is a replicated group reduced to what leases need: a log of
// (instant, command) that a leader applies, and that a new leader replays
// from the start after the old one is killed — the state it starts from
// is exactly what the log says, as Raft's is. While no leader is elected,
// calls are unavailable (nothing applied).
type simLog struct {
	m       *machine.Machine
	now     int64
	entries []simEntry
	down    atomic.Bool // read by the service's health watch too
	applied int
}

type simEntry struct {
	at   int64
	args [][]byte
}

func (l *simLog) Ready() bool { return !l.down.Load() }

func (l *simLog) Decide(_ context.Context, args [][]byte) (machine.Outcome, error) {
	if l.down.Load() {
		return machine.Outcome{}, ErrUnavailable
	}
	cp := make([][]byte, len(args))
	for i, a := range args {
		cp[i] = slices.Clone(a)
	}
	l.entries = append(l.entries, simEntry{l.now, cp})
	var w resp.Writer
	l.applied++
	return l.m.ApplyArgs(l.now, cp, &w), nil
}

// newSimLog is a log at this binary's apply level, as a group's leader
// raises it.
func newSimLog(t *testing.T) *simLog {
	log := &simLog{m: machine.New(machine.Options{}), now: 1_800_000_000_000_000_000}
	if out, _ := log.Decide(context.Background(), [][]byte{[]byte("SLUICE.LEVEL"), []byte(strconv.Itoa(machine.Level))}); out.Err != "" {
		t.Fatal(out.Err)
	}
	return log
}

// failover kills the leader: a new machine replays the log.
func (l *simLog) failover() {
	l.m = machine.New(machine.Options{})
	for _, e := range l.entries {
		var w resp.Writer
		l.m.ApplyArgs(e.at, e.args, &w)
	}
}

// remaining is what the bucket's counter has left now (a peek, not in
// the log: it changes nothing a reply depends on but the instant).
func (l *simLog) remaining(t *testing.T, route string) int64 {
	var w resp.Writer
	l.m.ApplyArgs(l.now, [][]byte{[]byte("RL.CHECK"), []byte("edge"), []byte("COST"), []byte("0"), []byte("DESCRIPTOR"), []byte("route"), []byte(route)}, &w)
	v, err := resp.DecodeReply(w.Buf)
	if err != nil {
		t.Fatal(err)
	}
	return v.([]any)[2].(int64)
}

// simHolder is a data plane as Envoy's rate_limit_quota filter is
// (internal/quotaplane), for one bucket: its stream's state is the holder
// name and what it holds.
type simHolder struct {
	quotaplane.Bucket
	name string
	held *streamHoldings
	// offset is when in each second it reports; lastReport its last.
	offset, lastReport time.Duration
	gone               bool
	// joined, goneAt (-1: never): when it came and went; byWindow what it
	// admitted in each window.
	joined, goneAt time.Duration
	byWindow       map[int64]int64
}

// shareSim is a simulation of holders sharing one bucket through RLQS.
type shareSim struct {
	rule   string        // the bucket's rate_limit
	window time.Duration // each window's admissions are checked
	limit  int64         // per window
	// holders at the start; asks reports whether holder i sends a request
	// at instant at (every millisecond it is there).
	holders int
	asks    func(i int, at time.Duration) bool
	seconds int
	// faults: leader kills and elections, streams that come back as new
	// holders, holders that come and go (seeded).
	faults bool
	seed   uint64
}

// shareSimResult is what the holders admitted: in all, in the worst
// window, and over the limit of all the windows.
type shareSimResult struct {
	admitted, worst, windows int64
	utilization              float64
	newBuckets               int
}

// run drives the holders — each a model of Envoy's filter, reporting once
// a second at its own offset — against one group's log, and checks every
// window: admitted ≤ the limit + the tokens the holders' buckets held at
// its start + the tokens of the buckets made new in it (README: the
// bound). It returns what was admitted.
func (c shareSim) run(t *testing.T) shareSimResult {
	t.Helper()
	log := newSimLog(t)
	start := log.now
	rules := "domain: edge\ndescriptors:\n  - key: route\n    rate_limit: " + c.rule + "\n"
	if out, _ := log.Decide(context.Background(), [][]byte{[]byte("RL.RULES"), []byte("LOAD"), []byte("edge.yaml"), []byte(rules)}); out.Err != "" {
		t.Fatal(out.Err)
	}
	svc, err := NewService(Config{}, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	q := quotaServer{s: svc}
	r := rand.New(rand.NewPCG(c.seed, 1))
	var holders []*simHolder
	join := func(now time.Duration) {
		i := len(holders)
		holders = append(holders, &simHolder{name: fmt.Sprintf("h%d", i), held: newHoldings(), lastReport: now,
			offset: time.Duration(i*137%1000) * time.Millisecond, joined: now, goneAt: -1, byWindow: map[int64]int64{}})
	}
	for range c.holders {
		join(0)
	}
	bucket := &rlqspb.BucketId{Bucket: map[string]string{"route": "/api"}}
	windowOf := func(at time.Duration) int64 { return (start + int64(at)) / int64(c.window) }
	admitted := map[int64]int64{} // per window
	// Per window: the tokens held at its start (fractions too: each
	// becomes a whole one first) and made new in it.
	bound := map[int64]float64{}
	newTokens := func() float64 {
		var n int64
		for _, h := range holders {
			n += h.NewTokens
		}
		return float64(n)
	}
	downUntil := time.Duration(-1)
	for ms := range c.seconds * 1000 {
		now := time.Duration(ms) * time.Millisecond
		log.now = start + int64(now)
		w := windowOf(now)
		if int64(now)%int64(c.window) == 0 {
			for _, h := range holders {
				if !h.gone {
					bound[w] += h.Level(now)
				}
			}
			bound[w] -= newTokens() // plus what is made new by the window's end
		}
		if c.faults && now%time.Second == 0 {
			// A leader kill now and then, with an election of 1-2 s.
			if !log.down.Load() && r.IntN(40) == 0 {
				log.down.Store(true)
				downUntil = now + time.Duration(1+r.IntN(2))*time.Second
			}
			if log.down.Load() && now >= downUntil {
				log.failover()
				log.down.Store(false)
				// A third of the streams were on the killed member: they
				// come back as new holders (new streams); what the old ones
				// were assigned stays counted until its ttl.
				for _, h := range holders {
					if r.IntN(3) == 0 {
						h.name, h.held = h.name+"'", newHoldings()
					}
				}
			}
			switch {
			case r.IntN(30) == 0:
				join(now)
			case r.IntN(30) == 0:
				live := slices.IndexFunc(holders, func(h *simHolder) bool { return !h.gone })
				if live >= 0 && len(holders) > 2 {
					holders[live].gone, holders[live].goneAt = true, now // stops reporting
				}
			}
		}
		for i, h := range holders {
			if h.gone {
				continue
			}
			if c.asks(i, now) && h.Request(now) {
				admitted[w]++
				h.byWindow[w]++
			}
			if now%time.Second != h.offset || now == h.joined {
				continue
			}
			u := h.Usage(bucket, now-h.lastReport)
			h.lastReport = now
			action, err := q.assign(context.Background(), "edge", h.name, u, h.held)
			if err != nil {
				if errorStatus(err).Code().String() != "Unavailable" {
					t.Fatalf("%v: %s's report: %v", now, h.name, err)
				}
				continue // keeps its assignment
			}
			if err := h.Assign(action, now); err != nil {
				t.Fatal(err)
			}
		}
		if next := time.Duration(ms+1) * time.Millisecond; windowOf(next) != w {
			bound[w] += newTokens()
		}
	}
	res := shareSimResult{}
	for w, n := range admitted {
		res.admitted += n
		res.worst = max(res.worst, n)
		// The rates of the assignments in force add up to the rule's,
		// each rounded to a millionth a second: 1e-5 a second in all.
		if float64(n) > float64(c.limit)+math.Ceil(bound[w]+1e-5*c.window.Seconds()) {
			t.Errorf("window %d admitted %d, over the limit %d + the tokens held at its start and made new in it %.2f", w, n, c.limit, bound[w])
		}
	}
	for _, h := range holders {
		res.newBuckets += h.New
	}
	res.windows = int64(time.Duration(c.seconds) * time.Second / c.window)
	res.utilization = float64(res.admitted) / float64(c.limit*res.windows)
	return res
}

// greedy asks every millisecond.
func greedy(int, time.Duration) bool { return true }

// Issue #45's simulation, on Envoy's bucket (issue #58): holders that
// report every second, with whole-second ttls and token buckets that
// start full and refill continuously, share a limit of 100 a minute (a
// fixed window) through leader kills (the new leader knows every
// assignment from the log), elections without a leader, streams that
// come back as new holders, and holders that vanish and join. Every window
// keeps the bound, and a holder there for three whole windows admits some
// of them.
func TestRLQSSimulationKeepsTheBound(t *testing.T) {
	for _, seed := range []uint64{45, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			res := shareSim{rule: "{name: w, unit: minute, requests_per_unit: 100}", window: time.Minute, limit: 100,
				holders: 4, asks: func(_ int, at time.Duration) bool { return at%(20*time.Millisecond) == 0 }, seconds: 600,
				faults: true, seed: seed}.run(t)
			t.Logf("admitted %d in %d windows (%.2f of the limit), worst window %d, %d buckets made",
				res.admitted, res.windows, res.utilization, res.worst, res.newBuckets)
			if res.utilization < 0.8 {
				t.Errorf("admitted %.2f of the limit through faults, while demand exceeds it", res.utilization)
			}
		})
	}
}

// Issue #58's measure: greedy data planes, as Envoy's filter applies
// assignments, use at least 90% of the limit, and the worst second of a
// 100/s limit is at most 1.1× it — one holder, three, ten, ten whose
// demand comes and goes every 700 ms, and a GCRA rule.
func TestRLQSSharesUseTheLimitAndKeepIt(t *testing.T) {
	onOff := func(i int, at time.Duration) bool { return (at/(700*time.Millisecond)+time.Duration(i))%2 == 0 }
	for _, c := range []struct {
		name    string
		sim     shareSim
		minUsed float64
	}{
		{"100/s, 1 holder", shareSim{rule: "{name: w, unit: second, requests_per_unit: 100}", limit: 100, holders: 1, asks: greedy}, 0.9},
		{"100/s, 3 holders", shareSim{rule: "{name: w, unit: second, requests_per_unit: 100}", limit: 100, holders: 3, asks: greedy}, 0.9},
		{"100/s, 10 holders", shareSim{rule: "{name: w, unit: second, requests_per_unit: 100}", limit: 100, holders: 10, asks: greedy}, 0.9},
		{"100/s, 10 holders on and off", shareSim{rule: "{name: w, unit: second, requests_per_unit: 100}", limit: 100, holders: 10, asks: onOff}, 0.5},
		{"GCRA 10/s burst 10, 3 holders", shareSim{rule: "{name: g, unit: second, requests_per_unit: 10, sluice: {algorithm: gcra, burst: 10}}", limit: 10, holders: 3, asks: greedy}, 0.9},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.sim.window, c.sim.seconds = time.Second, 20
			res := c.sim.run(t)
			t.Logf("%s: admitted %d of %d (%.2f), worst second %d, %d buckets made", c.name, res.admitted, c.sim.limit*res.windows,
				res.utilization, res.worst, res.newBuckets)
			if res.utilization < c.minUsed {
				t.Errorf("used %.2f of the limit, want at least %.2f", res.utilization, c.minUsed)
			}
			if c.sim.limit == 100 && res.worst > 110 {
				t.Errorf("the worst second admitted %d, past 1.1× the limit of 100", res.worst)
			}
		})
	}
}

// Bad reports get a clear error and charge nothing; counts that overflow
// ask for as much as a lease takes.
func TestRLQSBadReports(t *testing.T) {
	log := newSimLog(t)
	rules := "domain: edge\ndescriptors:\n  - key: route\n    rate_limit: {name: w, unit: minute, requests_per_unit: 100}\n"
	log.Decide(context.Background(), [][]byte{[]byte("RL.RULES"), []byte("LOAD"), []byte("edge.yaml"), []byte(rules)})
	svc, err := NewService(Config{}, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	q := quotaServer{s: svc}
	held := newHoldings()
	report := func(domain string, bucket map[string]string, allowed, denied uint64) (*rlqspb.RateLimitQuotaResponse_BucketAction, error) {
		return q.assign(context.Background(), domain, "h", &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: &rlqspb.BucketId{Bucket: bucket}, NumRequestsAllowed: allowed, NumRequestsDenied: denied}, held)
	}
	long := strings.Repeat("x", 5000)
	for _, c := range []struct {
		domain string
		bucket map[string]string
		want   string
	}{
		{"edge", nil, "at least one entry"},
		{"edge", map[string]string{"": "x"}, "must not be empty"},
		{"edge", map[string]string{long: "x"}, "key is 5000 bytes"},
		{"edge", map[string]string{"route": long}, "value is 5000 bytes"},
		{strings.Repeat("d", 300), map[string]string{"route": "/a"}, "domain is 300 bytes"},
	} {
		if _, err := report(c.domain, c.bucket, 1, 0); err == nil || errorStatus(err).Code().String() != "InvalidArgument" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want INVALID_ARGUMENT about %q", c.bucket, err, c.want)
		}
	}
	// A report over 12 hours: its lease would outlive a lease's day.
	_, err = q.assign(context.Background(), "edge", "h", &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		BucketId: &rlqspb.BucketId{Bucket: map[string]string{"route": "/a"}}, NumRequestsAllowed: 1,
		TimeElapsed: durationpb.New(12*time.Hour + time.Second)}, held)
	if err == nil || errorStatus(err).Code().String() != "InvalidArgument" || !strings.Contains(err.Error(), "time_elapsed is 12h0m1s, more than 12h0m0s") {
		t.Errorf("a report of 12 h 1 s: %v", err)
	}
	if r := log.remaining(t, "/a"); r != 100 {
		t.Fatalf("bad reports charged: %d left", r)
	}
	// Counts that overflow: charged as much as a call takes (the rest at
	// the next report), and the whole rate asked for — 100 a minute is 5
	// every 3 s, with the burst of 2 s of it.
	a, err := report("edge", map[string]string{"route": "/a"}, math.MaxUint64, 2)
	tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	if err != nil || tb.GetMaxTokens() != 3 || tb.GetTokensPerFill().GetValue() != 5 || tb.GetFillInterval().GetSeconds() != 3 {
		t.Fatalf("counts that overflow: %v %v, want 5 every 3 s and 3 at once", a, err)
	}
	if r := log.remaining(t, "/a"); r != 0 {
		t.Fatalf("counts that overflow: %d left, want all charged", r)
	}
}

// A stream's holdings are bounded by buckets and by the bytes of their
// ids: past either, a new bucket is RESOURCE_EXHAUSTED and charges
// nothing, while the buckets held are still renewed; a bucket no rule
// limits is not held at all.
func TestRLQSStreamBudget(t *testing.T) {
	log := newSimLog(t)
	rules := "domain: edge\ndescriptors:\n  - key: route\n    rate_limit: {name: w, unit: minute, requests_per_unit: 1000000}\n  - key: free\n    rate_limit: {unlimited: true}\n"
	log.Decide(context.Background(), [][]byte{[]byte("RL.RULES"), []byte("LOAD"), []byte("edge.yaml"), []byte(rules)})
	svc, err := NewService(Config{Quota: QuotaLimits{StreamBytes: 64 << 10}}, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	q := quotaServer{s: svc}
	held := newHoldings()
	report := func(bucket map[string]string) error {
		_, err := q.assign(context.Background(), "edge", "h", &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: &rlqspb.BucketId{Bucket: bucket}, NumRequestsAllowed: 1}, held)
		return err
	}
	for i := range 100 {
		if err := report(map[string]string{"free": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(held.buckets) != 0 {
		t.Fatalf("%d unlimited buckets held", len(held.buckets))
	}
	// 4 KB values: 15 fit in 64 KB, the 16th does not.
	value := strings.Repeat("v", 4000)
	n := 0
	for ; n < 100; n++ {
		if err := report(map[string]string{"route": fmt.Sprintf("%04d", n) + value}); err != nil {
			if errorStatus(err).Code().String() != "ResourceExhausted" {
				t.Fatalf("bucket %d past the stream's bytes: %v", n, err)
			}
			break
		}
	}
	if n != 16 || held.bytes > 64<<10 {
		t.Fatalf("%d buckets of 4 KB held in %d bytes, want 16 within 64 KB", n, held.bytes)
	}
	if r := log.remaining(t, fmt.Sprintf("%04d", n)+value); r != 1000000 {
		t.Fatalf("the refused bucket was charged: %d left", r)
	}
	if err := report(map[string]string{"route": "0000" + value}); err != nil {
		t.Fatalf("a held bucket renewed at the budget: %v", err)
	}
	// Small ids within the default bytes: the 4097th bucket is refused.
	svc.cfg.Quota.StreamBytes = 1 << 20
	held = newHoldings()
	for i := range maxStreamBuckets {
		if err := report(map[string]string{"route": strconv.Itoa(i)}); err != nil {
			t.Fatalf("bucket %d of %d: %v", i+1, maxStreamBuckets, err)
		}
	}
	if err := report(map[string]string{"route": "one-more"}); err == nil || errorStatus(err).Code().String() != "ResourceExhausted" {
		t.Fatalf("bucket %d: %v", maxStreamBuckets+1, err)
	}
}

// A report that finds no leader keeps its count for the next — a new
// bucket's first report too (issue #58: no report's count lost).
func TestRLQSReportWithoutALeaderIsChargedLater(t *testing.T) {
	log := newSimLog(t)
	rules := "domain: edge\ndescriptors:\n  - key: route\n    rate_limit: {name: w, unit: minute, requests_per_unit: 100}\n"
	log.Decide(context.Background(), [][]byte{[]byte("RL.RULES"), []byte("LOAD"), []byte("edge.yaml"), []byte(rules)})
	svc, err := NewService(Config{}, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	q := quotaServer{s: svc}
	held := newHoldings()
	report := func(allowed uint64) error {
		_, err := q.assign(context.Background(), "edge", "h", &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: &rlqspb.BucketId{Bucket: map[string]string{"route": "/a"}}, NumRequestsAllowed: allowed,
			TimeElapsed: durationpb.New(time.Second)}, held)
		return err
	}
	log.down.Store(true)
	if err := report(5); err == nil {
		t.Fatal("a report without a leader: no error")
	}
	log.down.Store(false)
	if err := report(3); err != nil {
		t.Fatal(err)
	}
	if r := log.remaining(t, "/a"); r != 92 {
		t.Fatalf("%d left, want 92: the 5 admitted before a leader answered, and the 3 after", r)
	}
}
