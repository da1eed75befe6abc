package decide

import (
	"bytes"
	"math/bits"
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// RL.SHARE: a bucket's rate and burst shared among the data planes that
// decide it locally with a token bucket each — Envoy's rate_limit_quota
// filter (RLQS), Doorman's model. A lease (RL.LEASE) is units charged
// now, which a token bucket that starts full and refills does not follow:
// a data plane admits what its bucket refills, charged or not (issue #58).
// A share instead gives each holder a part of the rule's rate and of its
// burst, by what it asks, and the holder's reports charge the counter
// with what it admitted:
//
//   - The rule's rate is its limit over its window (GCRA: its count over
//     its period), and its burst a tenth of a window's limit but no more
//     than two seconds of its rate, at least 1 (GCRA: its burst + 1). A bucket that starts full and refills for a
//     whole window admits at most the limit plus that burst.
//   - A holder's part is the rate × its ask / all the asks (never more
//     than it asks), and of the burst one token and the rest by the same
//     proportion (the burst shared is at least a token a holder), out of
//     what the other holders' assignments in force leave: the assignments in
//     force never add up past the rate or the burst. A holder whose part
//     is taken gets it once the others have been given their smaller
//     parts, at their next reports.
//   - An assignment in force is kept while it still fits and is within a
//     tenth of the holder's part (its burst within a tenth, or 1): a data plane keeps its bucket (and its
//     tokens) while the assignment is unchanged, and starts a new full
//     one when it changes, so changes are few.
//
// The records are a LeaseDemand of the bucket (its holders' asks and
// assignments), in the counter's slot as a lease's are, under "shares".

func (m *Room) shareCommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "rl.share", Arity: -13, Flags: []string{"write", "denyoom"},
			FirstKey: 1, LastKey: 1, Step: 1, Group: "sluice", Since: "1.6.0", Complexity: "O(D + H) where D is the number of descriptor entries and H the holders of the bucket",
			Summary: "Shares a bucket's rate and burst among the holders that decide it locally with token buckets: charges what the holder reports it admitted, records what it asked, and replies its assignment [burst, tokens_per_fill, fill_interval_s, ttl_ms, generation] (burst -1: no rule limits the bucket; 0: nothing now).",
			Args: []cmdspec.Arg{
				{Name: "domain", Type: "key"}, {Name: "holder", Type: "string"}, {Name: "ttl-seconds", Type: "integer"},
				{Name: "used", Type: "integer", Token: "USED"},
				{Name: "asked", Type: "integer", Token: "ASKED"},
				{Name: "over", Type: "integer", Token: "OVER"},
				{Name: "descriptor", Type: "block", Token: "DESCRIPTOR", Sub: []cmdspec.Arg{
					{Name: "entry", Type: "block", Multiple: true, Sub: []cmdspec.Arg{{Name: "key", Type: "string"}, {Name: "value", Type: "string"}}},
				}},
			}}, Decides: true, Stores: func(room.View, [][]byte, int64) bool { return true }, Slots: room.AllSlots,
		Keys: func([][]byte) []int { return []int{1} },
		Run:  m.run(runShare), Check: m.check(checkShare), Route: m.shareRouteKey,
	}}
}

// shareRequest is an RL.SHARE as parsed.
type shareRequest struct {
	lease leaseRequest // domain, holder, ttl and descriptor
	// used is what the holder admitted since its last report; asked the
	// requests it saw over the last over seconds.
	used, asked, over int64
}

// shareBurstSeconds bounds a window rule's burst by its rate: two
// seconds of it.
const shareBurstSeconds = 2

// maxShareSearch is the longest fill interval (s) tried for a rate within
// 1%; maxShareEvery bounds any, a slower rate refilled a unit at a time.
const (
	maxShareSearch = 3600
	maxShareEvery  = 400 * 86400
)

// errShareLevel refuses RL.SHARE in a log below level 1.
const errShareLevel = "ERR RL.SHARE needs every member of the group at sluice 0.5.0 or later (apply level 1); try again once the group is upgraded"

func parseShare(args [][]byte) (shareRequest, string) {
	var r shareRequest
	if len(args) < 13 {
		return r, "ERR wrong number of arguments for 'rl.share' command"
	}
	l := &r.lease
	l.domain, l.holder = args[1], args[2]
	ttl, ok := resp.ParseInt(args[3])
	if !ok || ttl < 1 || ttl > maxReserveTTL {
		return r, "ERR ttl-seconds must be an integer in [1, 86400]"
	}
	l.ttl = ttl * 1_000_000_000
	if !resp.EqualFold(args[4], "used") || !resp.EqualFold(args[6], "asked") || !resp.EqualFold(args[8], "over") || !resp.EqualFold(args[10], "descriptor") {
		return r, "ERR syntax error: RL.SHARE <domain> <holder> <ttl-seconds> USED <n> ASKED <n> OVER <seconds> DESCRIPTOR <key> <value> …"
	}
	if len(l.holder) == 0 || len(l.holder) > maxHolder {
		return r, "ERR a holder must be 1 to 128 bytes"
	}
	for _, f := range []struct {
		word     string
		arg      []byte
		to       *int64
		from, up int64
	}{{"USED", args[5], &r.used, 0, maxRLSValue}, {"ASKED", args[7], &r.asked, 0, maxRLSValue}, {"OVER", args[9], &r.over, 1, maxReserveTTL}} {
		n, ok := resp.ParseInt(f.arg)
		if !ok || n < f.from || n > f.up {
			return r, "ERR " + f.word + " must be an integer in [" + strconv.FormatInt(f.from, 10) + ", " + strconv.FormatInt(f.up, 10) + "]"
		}
		*f.to = n
	}
	l.desc = args[10:]
	return r, boundLeaseDescriptor(l.desc)
}

func checkShare(m *Room, args [][]byte) string {
	r, bad := parseShare(args)
	if bad != "" {
		return bad
	}
	p := m.plan()
	defer m.release(p)
	return parseLeaseDescriptor(&r.lease, p)
}

// shareRouteKey is the key an RL.SHARE is routed by: its counter's, as a
// lease's.
func (m *Room) shareRouteKey(args [][]byte) []byte {
	r, bad := parseShare(args)
	if bad != "" {
		return nil
	}
	p := m.plan()
	defer m.release(p)
	if m.planLease(p, &r.lease) != "" || len(p.checks) == 0 {
		return nil
	}
	return bytes.Clone(p.checks[0].key)
}

func runShare(x *apply, args [][]byte) {
	r, bad := parseShare(args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	if !x.At(1) {
		x.Fail(errShareLevel)
		return
	}
	p := x.m.plan()
	defer x.m.release(p)
	l := &r.lease
	if bad := x.m.planLease(p, l); bad != "" {
		x.Fail(bad)
		return
	}
	res := room.ShareResult{TTL: l.ttl}
	if len(p.checks) == 0 {
		res.Unlimited = true
		x.answerShare(res)
		return
	}
	for i := range p.checks {
		if c := &p.checks[i]; c.deny && !c.shadow {
			res.Denied = true
			x.answerShare(res)
			return
		}
	}
	domain := view(l.domain)
	at := slot.Of(p.checks[0].key)
	start := len(p.keys)
	p.keys = appendLeaseKey(p.keys, at, "shares", domain, []byte(leaseBucket(l.desc)))
	demandKey := p.keys[start:len(p.keys):len(p.keys)]
	if err := x.m.fenceSlot(at); err != nil {
		x.Error(err)
		return
	}
	now, dom, took, err := x.lockPlan(p)
	if err != nil {
		x.Error(err)
		return
	}
	defer x.ReleaseGroup(&p.locks, took)
	ds, _ := x.LockSlot(at)
	x.adjustLimits(p, now, dom)
	rate, burst, ok := shareCapacity(p.checks)
	if !ok {
		x.Fail("ERR RL.SHARE shares rates: this bucket's limits are quotas of a period (lease them with RL.LEASE)")
		return
	}
	if r.used > 0 {
		// What the holder admitted is charged, past the limit if it must
		// be: it was admitted.
		for i := range p.checks {
			if c := &p.checks[i]; !c.deny {
				if _, err := x.m.limiters.Force(x, chargeOf(c, r.used), r.used, now); err != nil {
					x.Error(err)
					return
				}
			}
		}
	}
	demand, err := demandAt(ds, demandKey, now)
	if err != nil {
		x.Error(err)
		return
	}
	// The ask in requests a thousand seconds (any ask at least one); an
	// ask of none releases the holder's share.
	want := int64(0)
	if r.asked > 0 {
		want = max(1, r.asked*1000/r.over)
	}
	if err := demand.ask(l.holder, want, now+2*l.ttl, now); err != nil {
		x.Error(err)
		return
	}
	sh := demand.assign(view(l.holder), rate, burst, l.ttl, now)
	if err := storeDemand(ds, demandKey, demand); err != nil {
		x.Error(err)
		return
	}
	if sh.Burst == 0 {
		res.Denied, res.Gen = true, sh.Gen
		x.answerShare(res)
		return
	}
	res.Burst, res.PerFill, res.Every, res.Gen = sh.Burst, sh.PerFill, sh.Every, sh.Gen
	res.TTL = sh.Until - now
	x.answerShare(res)
}

// chargeOf is the charge of n units to c's counter, at its latest.
func chargeOf(c *limitCheck, n int64) *limiters.Charge {
	l := &limiters.Charge{Key: c.key, Kind: c.kind, Units: n, Anchor: -1, Step: c.win.Window, Limit: c.win.Limit}
	if c.kind == keyspace.KindGCRA {
		l.Step = c.gcra.EmissionInterval()
	}
	return l
}

// shareCapacity is what the bucket's limits share: the least rate (in
// millionths of a unit a second) and burst of the limits that can refuse.
// ok is false when none has a rate (quotas of a period only).
func shareCapacity(checks []limitCheck) (rate, burst int64, ok bool) {
	for i := range checks {
		c := &checks[i]
		if c.shadow {
			continue
		}
		var r, b int64
		switch c.kind {
		case keyspace.KindGCRA:
			r = perSecondMicro(c.gcra.Count, c.gcra.Period)
			b = c.gcra.MaxBurst + 1
		case keyspace.KindFixedWindow, keyspace.KindSlidingCounter, keyspace.KindSlidingLog:
			r = perSecondMicro(c.win.Limit, c.win.Window)
			// A tenth of the window's limit, and no more than two seconds
			// of the rate: a burst only bridges the time between reports,
			// and every bucket made new starts full.
			b = max(1, min(c.win.Limit/10, r*shareBurstSeconds/1_000_000))
		default:
			continue
		}
		if !ok || r < rate {
			rate = r
		}
		if !ok || b < burst {
			burst = b
		}
		ok = true
	}
	return rate, burst, ok
}

// perSecondMicro is n units per span ns in millionths of a unit a second,
// rounded down.
func perSecondMicro(n, span int64) int64 {
	if n <= 0 || span <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(n), 1_000_000_000_000_000)
	if hi >= uint64(span) {
		return maxRLSValue * 1_000_000 // faster than any share
	}
	q, _ := bits.Div64(hi, lo, uint64(span))
	return int64(min(q, maxRLSValue*1_000_000))
}

// answerShare answers r: [burst, tokens_per_fill, fill_interval_s,
// ttl_ms, generation] — burst -1 for a bucket no rule limits, 0 when
// nothing may be admitted now.
func (x *apply) answerShare(r room.ShareResult) {
	x.out.Share, x.out.Shared = r, true
	x.out.Limited = r.Denied
	burst := r.Burst
	switch {
	case r.Unlimited:
		burst = -1
	case r.Denied:
		burst = 0
	}
	x.w.Array(5)
	x.w.Int(burst)
	x.w.Int(r.PerFill)
	x.w.Int(r.Every)
	x.w.Int(r.TTL / 1_000_000)
	x.w.Int(r.Gen)
}

// assign is holder's assignment at now out of a bucket of rate (millionths
// a second) and burst, for ttl: its part by its ask of what the others'
// assignments in force leave, or the one it has while that still fits and
// is within a tenth of its part. holder asks (ask) before.
func (d *LeaseDemand) assign(holder string, rate, burst, ttl, now int64) Share {
	at := -1
	var sum uint64
	var othersRate, othersBurst, holding int64
	for i := range d.Holders {
		h := &d.Holders[i]
		sum += uint64(h.Want)
		switch {
		case h.Holder == holder:
			at = i
		case h.Share.inForce(now):
			othersRate += h.Share.rate()
			othersBurst += h.Share.Burst
			holding++
		}
	}
	if at < 0 {
		return Share{}
	}
	h := &d.Holders[at]
	// Every holder asking gets a token of burst at least (a token bucket
	// of none admits nothing), and the rest by its ask: the burst shared
	// is the rule's or, past it, a token for each holder of one and for
	// this one. (Counting holders that ask and hold nothing would let the
	// sum pass it once they stop asking.)
	if h.Want > 0 {
		holding++
	}
	burst = max(burst, holding)
	freeRate, freeBurst := max(0, rate-othersRate), max(0, burst-othersBurst)
	var partRate, partBurst int64
	if h.Want > 0 && sum > 0 {
		// Want is a thousandth of a request a second: at most 1000 × Want
		// millionths.
		partRate = min(mulDivDown(rate, h.Want, sum), h.Want*1000)
		partBurst = 1 + mulDivDown(burst-holding, h.Want, sum)
	}
	partRate, partBurst = min(partRate, freeRate), min(partBurst, freeBurst)
	cur := &h.Share
	if cur.inForce(now) && cur.rate() <= freeRate && cur.Burst <= freeBurst && near(cur.rate(), partRate) &&
		(near(cur.Burst, partBurst) || abs(cur.Burst-partBurst) <= 1) {
		cur.Until = now + ttl
		return *cur
	}
	perFill, every := tokenRate(partRate)
	gen := cur.Gen + 1
	if perFill == 0 || partBurst < 1 {
		*cur = Share{Gen: gen}
		return *cur
	}
	*cur = Share{Burst: partBurst, PerFill: perFill, Every: every, Until: now + ttl, Gen: gen}
	return *cur
}

// near reports b within a tenth of a.
func near(a, b int64) bool { return abs(a-b)*10 <= a }

func abs(d int64) int64 {
	if d < 0 {
		return -d
	}
	return d
}

// mulDivDown is a × b / c rounded down (a, b ≥ 0; c > 0), at most the
// largest int64.
func mulDivDown(a, b int64, c uint64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= c {
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, c)
	return int64(min(q, 1<<63-1))
}

// tokenRate is a rate (millionths a second) as a token bucket's refill:
// tokens_per_fill every whole seconds, the fewest seconds (to an hour)
// whose rounding down loses at most 1% — never faster than the rate. 0
// tokens: under one in 400 days.
func tokenRate(rate int64) (perFill, every int64) {
	if rate <= 0 {
		return 0, 0
	}
	for every = 1; every <= maxShareSearch; every++ {
		x := rate * every // ≤ 2^32 × 10^6 × 3600: no overflow
		// rate was rounded down to a millionth: x is short of the true
		// refill by under every millionths, so round up by that much —
		// unless the assignment's own rate (Share.rate) would then pass
		// rate (5 per 3 s is 1666666 millionths, as is 100 a minute).
		perFill = (x + every) / 1_000_000
		if perFill*1_000_000/every > rate {
			perFill--
		}
		if perFill >= 1 && (x-perFill*1_000_000)*100 <= x {
			return min(perFill, maxRLSValue), every
		}
	}
	// Slower than about one an hour: one token at a time.
	every = (1_000_000 + rate - 1) / rate
	if every > maxShareEvery {
		return 0, 0
	}
	return 1, every
}
