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
	name       string
	held       *streamHoldings
	lastReport time.Duration
	gone       bool
	// joined, goneAt (-1: never): when it came and went; byWindow what it
	// admitted in each window; grantedAt when its last grant came.
	joined, goneAt time.Duration
	byWindow       map[int64]int64
	grantedAt      time.Duration
}

// Issue #45's simulation: holders that behave as Envoy's filter does
// (report every second, whole-second ttls, token buckets, denying when
// their assignment is gone) share a limit of 100 a minute (a fixed window)
// through leader kills (the new leader knows every grant from the log),
// elections without a leader, streams that come back as new holders, and
// holders that vanish and join. In every window the holders admit no more
// than the limit plus the bound — the tokens they held across the
// window's start, charged in the window before — and a holder whose
// report finds room for every holder is granted something, and one there
// for three whole windows admits some of them.
func TestRLQSSimulationKeepsTheBound(t *testing.T) {
	for _, seed := range []uint64{45, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { simulateRLQS(t, seed) })
	}
}

func simulateRLQS(t *testing.T, seed uint64) {
	const (
		limit   = 100
		window  = time.Minute
		seconds = 600
	)
	log := &simLog{m: machine.New(machine.Options{}), now: 1_800_000_000_000_000_000}
	start := log.now
	// The log at this binary's level, as a group's leader raises it.
	if out, _ := log.Decide(context.Background(), [][]byte{[]byte("SLUICE.LEVEL"), []byte(strconv.Itoa(machine.Level))}); out.Err != "" {
		t.Fatal(out.Err)
	}
	rules := "domain: edge\ndescriptors:\n  - key: route\n    rate_limit: {name: w, unit: minute, requests_per_unit: 100}\n"
	if out, _ := log.Decide(context.Background(), [][]byte{[]byte("RL.RULES"), []byte("LOAD"), []byte("edge.yaml"), []byte(rules)}); out.Err != "" {
		t.Fatal(out.Err)
	}
	svc, err := NewService(Config{}, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	q := quotaServer{s: svc}
	r := rand.New(rand.NewPCG(seed, 1))
	var holders []*simHolder
	join := func(now time.Duration) {
		holders = append(holders, &simHolder{name: fmt.Sprintf("h%d", len(holders)), held: newHoldings(), lastReport: now,
			joined: now, goneAt: -1, byWindow: map[int64]int64{}})
	}
	for range 4 {
		join(0)
	}
	bucket := &rlqspb.BucketId{Bucket: map[string]string{"route": "/api"}}
	admitted := map[int64]int64{} // per window
	carried := map[int64]int64{}  // per window: tokens held at its start
	maxGrant := map[string]int64{}
	downUntil := time.Duration(-1)
	for sec := range seconds {
		now := time.Duration(sec) * time.Second
		log.now = start + int64(now)
		// Faults: a leader kill now and then, with an election of 1-2 s.
		if !log.down.Load() && r.IntN(40) == 0 {
			log.down.Store(true)
			downUntil = now + time.Duration(1+r.IntN(2))*time.Second
		}
		if log.down.Load() && now >= downUntil {
			log.failover()
			log.down.Store(false)
			// A third of the streams were on the killed member: they come
			// back as new holders (new streams); what the old ones held
			// keeps its charge until its ttl.
			for _, h := range holders {
				if r.IntN(3) == 0 {
					h.name, h.held = h.name+"'", newHoldings()
				}
			}
		}
		if now%window == 0 {
			// What the holders carry into this window: granted (charged)
			// before it, usable in it — the bound.
			for _, h := range holders {
				if !h.gone && h.grantedAt < now {
					carried[int64((start+int64(now))/int64(window))] += h.Tokens(now)
				}
			}
		}
		switch {
		case r.IntN(30) == 0:
			join(now)
		case r.IntN(30) == 0:
			live := slices.IndexFunc(holders, func(h *simHolder) bool { return !h.gone })
			if live >= 0 && len(holders) > 2 {
				holders[live].gone, holders[live].goneAt = true, now // stops reporting; its lease ends
			}
		}
		for _, h := range holders {
			if h.gone {
				continue
			}
			// Greedy: 50 requests in the second.
			for k := range 50 {
				at := now + time.Duration(k)*time.Second/50
				if h.Request(at) {
					w := int64((start + int64(at)) / int64(window))
					admitted[w]++
					h.byWindow[w]++
				}
			}
		}
		// Every holder reports at the second's end.
		end := now + time.Second
		log.now = start + int64(end)
		for _, h := range holders {
			if h.gone {
				continue
			}
			room := int64(-1)
			if !log.down.Load() {
				room = log.remaining(t, "/api")
			}
			u := h.Usage(bucket, end-h.lastReport)
			h.lastReport = end
			action, err := q.assign(context.Background(), "edge", h.name, u, h.held)
			if err != nil {
				if errorStatus(err).Code().String() != "Unavailable" {
					t.Fatalf("%v: %s's report: %v", end, h.name, err)
				}
				continue // keeps its assignment
			}
			if err := h.Assign(action, end); err != nil {
				t.Fatal(err)
			}
			if tb := action.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket(); tb != nil {
				h.grantedAt = end
				maxGrant[h.name] = max(maxGrant[h.name], int64(tb.GetMaxTokens()))
			} else {
				live := 0
				for _, o := range holders {
					if !o.gone {
						live++
					}
				}
				if room >= int64(live) {
					t.Errorf("%v: %s was given nothing with %d left for %d holders", end, h.name, room, live)
				}
			}
		}
	}
	var bound int64
	for _, g := range maxGrant {
		bound = max(bound, g)
	}
	worst := int64(0)
	for w, n := range admitted {
		worst = max(worst, n)
		if n > limit+carried[w] {
			t.Errorf("window %d admitted %d, over the limit %d + what the holders carried into it %d", w, n, limit, carried[w])
		}
	}
	// Shared: a holder there for three whole windows admitted some of
	// them (a window's limit may be spent by the holders that asked before
	// one came; not three in a row).
	for _, h := range holders {
		whole, got := 0, int64(0)
		for w := range admitted {
			from := time.Duration(w*int64(window) - start)
			if h.joined < from && (h.goneAt < 0 || h.goneAt > from+window) {
				whole++
				got += h.byWindow[w]
			}
		}
		if whole >= 3 && got == 0 {
			t.Errorf("%s was there for %d whole windows and admitted nothing", h.name, whole)
		}
	}
	var total int64
	for _, n := range admitted {
		total += n
	}
	t.Logf("%d holders, %d windows: admitted %d (%.2f of the limit's %d), worst window %d, largest grant %d, %d entries",
		len(holders), len(admitted), total, float64(total)/float64(limit*int64(len(admitted))), limit*int64(len(admitted)), worst, bound, log.applied)
	if total < int64(len(admitted)-2)*limit*9/10 {
		t.Errorf("admitted %d in %d windows: under 0.9 of the limit while demand exceeds it", total, len(admitted))
	}
	// Every return names the grant it gives back: a late copy of one
	// never ends the holder's next grant.
	returns := 0
	for _, e := range log.entries {
		if len(e.args) > 1 && string(e.args[1]) == "RETURN" {
			returns++
			if len(e.args) < 8 || string(e.args[6]) != "GRANT" {
				t.Fatalf("a return that names no grant: %q", e.args)
			}
		}
	}
	if returns == 0 {
		t.Fatal("no lease was returned")
	}
}

// Bad reports get a clear error and charge nothing; counts that overflow
// ask for as much as a lease takes.
func TestRLQSBadReports(t *testing.T) {
	log := &simLog{m: machine.New(machine.Options{}), now: 1_800_000_000_000_000_000}
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
	a, err := report("edge", map[string]string{"route": "/a"}, math.MaxUint64, 2)
	if err != nil || a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket().GetMaxTokens() != 100 {
		t.Fatalf("counts that overflow: %v %v, want the whole 100", a, err)
	}
}

// A stream's holdings are bounded by buckets and by the bytes of their
// ids: past either, a new bucket is RESOURCE_EXHAUSTED and charges
// nothing, while the buckets held are still renewed; a bucket no rule
// limits is not held at all.
func TestRLQSStreamBudget(t *testing.T) {
	log := &simLog{m: machine.New(machine.Options{}), now: 1_800_000_000_000_000_000}
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

// failingLog is simLog whose next lease or next return is unavailable
// (a failover between a report's two calls).
type failingLog struct {
	*simLog
	failLease, failReturn bool
}

func (l *failingLog) Decide(ctx context.Context, args [][]byte) (machine.Outcome, error) {
	if string(args[0]) == "RL.LEASE" {
		ret := string(args[1]) == "RETURN"
		if ret && l.failReturn || !ret && l.failLease {
			l.failReturn, l.failLease = false, false
			return machine.Outcome{}, ErrUnavailable
		}
	}
	return l.simLog.Decide(ctx, args)
}

// Issue #58: a report that gave back what the last grant left always
// answers the bucket — when its lease is then unavailable, with DENY_ALL,
// never silence (Envoy would go on admitting from tokens just refunded:
// 140 admitted on a limit of 100); and a report whose return did not land
// keeps its count, so the next return gives back only what both left.
func TestRLQSRefundAlwaysAnswersTheBucket(t *testing.T) {
	log := &failingLog{simLog: &simLog{m: machine.New(machine.Options{}), now: 1_800_000_000_000_000_000}}
	log.Decide(context.Background(), [][]byte{[]byte("SLUICE.LEVEL"), []byte(strconv.Itoa(machine.Level))})
	rules := "domain: edge\ndescriptors:\n  - key: route\n    rate_limit: {name: w, unit: minute, requests_per_unit: 100}\n"
	log.Decide(context.Background(), [][]byte{[]byte("RL.RULES"), []byte("LOAD"), []byte("edge.yaml"), []byte(rules)})
	svc, err := NewService(Config{}, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	q := quotaServer{s: svc}
	held := newHoldings()
	report := func(route string, allowed, denied uint64) (*rlqspb.RateLimitQuotaResponse_BucketAction, error) {
		log.now += int64(100 * time.Millisecond) // within a lease's 2 s
		return q.assign(context.Background(), "edge", "h", &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: &rlqspb.BucketId{Bucket: map[string]string{"route": route}}, NumRequestsAllowed: allowed,
			NumRequestsDenied: denied, TimeElapsed: durationpb.New(time.Second)}, held)
	}
	tokens := func(a *rlqspb.RateLimitQuotaResponse_BucketAction) uint32 {
		return a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket().GetMaxTokens()
	}
	if a, err := report("/a", 0, 100); err != nil || tokens(a) != 100 {
		t.Fatalf("the first grant: %v %v", a, err)
	}
	log.failLease = true
	a, err := report("/a", 30, 0)
	if err != nil || a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetBlanketRule().String() != "DENY_ALL" {
		t.Fatalf("a refund whose lease was unavailable: %v %v, want DENY_ALL", a, err)
	}
	if r := log.remaining(t, "/a"); r != 70 {
		t.Fatalf("after 30 admitted and the rest given back, %d left, want 70", r)
	}

	if a, err := report("/b", 0, 100); err != nil || tokens(a) != 100 {
		t.Fatalf("the first grant of /b: %v %v", a, err)
	}
	log.failReturn = true
	if _, err := report("/b", 30, 0); err == nil {
		t.Fatal("a return that did not land: no error")
	}
	// 30 and 20 admitted from the grant of 100: 50 given back, then a
	// lease of the 20 asked.
	if a, err := report("/b", 20, 0); err != nil || tokens(a) != 20 {
		t.Fatalf("the next report: %v %v, want a grant of 20", a, err)
	}
	if r := log.remaining(t, "/b"); r != 30 {
		t.Fatalf("%d left, want 30 (50 admitted, 20 granted): a report's count was dropped", r)
	}
}
