package machine

import (
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/window"
)

// RL.SHOULDRATELIMIT is Envoy's rate limit service call
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) as a
// machine command: the gRPC and HTTP front doors turn a RateLimitRequest
// into it, so a decision goes through the same apply (and the same log) as
// RL.CHECK. Each request descriptor is matched against the domain's rules
// as RL.CHECK matches it, every matched limit is checked at one instant,
// and all are charged or none; the reply has one status per descriptor, in
// request order, as envoyproxy/ratelimit reports them.
//
//	RL.SHOULDRATELIMIT <domain> <hits_addend> <descriptor> [<descriptor> …]
//	<descriptor> := <entries> <hits|-> <requests_per_unit|-> <unit|-> <key> <value> …
//
// Every descriptor says how many key/value entries it has, so keys and
// values can be any bytes. hits_addend is the request's (0 means 1); a
// descriptor's own hits (0 allowed: check without charging) replaces it,
// "-" when it has none. A requests_per_unit and unit (second … year) are
// the descriptor's own limit, which replaces its rule (a fixed window, as
// in Envoy); "-" "-" when it has none.
//
// Reply: [overall, status…], overall 1 (OK) or 2 (OVER_LIMIT), Envoy's
// codes; each status [code, requests_per_unit, unit, name, remaining,
// duration_until_reset, shadow]: requests_per_unit -1, unit and name ""
// and duration -1 when no limit applies (no rule, or an unlimited one,
// whose remaining is 4294967295); shadow 1 when a shadow-mode rule would
// have refused it.

const (
	// RLSCodeOK and RLSCodeOverLimit are Envoy's RateLimitResponse codes.
	RLSCodeOK        = 1
	RLSCodeOverLimit = 2
	// rlsUnlimitedRemaining is the remaining Envoy reports for an unlimited
	// descriptor (math.MaxUint32).
	rlsUnlimitedRemaining = 1<<32 - 1
	// maxRLSValue bounds hits and requests_per_unit: they are uint32 in
	// Envoy's messages.
	maxRLSValue = 1<<32 - 1
)

func rlsCommands() []*Command {
	return []*Command{{
		Name: "rl.shouldratelimit", Decides: true, slots: allSlots, Arity: -9, Flags: []string{"write", "denyoom", "fast"},
		FirstKey: 1, LastKey: 1, Step: 1,
		Group: "sluice", Since: "1.2.0", Complexity: "O(D) where D is the number of descriptor entries",
		Summary: "Envoy's ShouldRateLimit: <domain> <hits_addend> then per descriptor <entries> <hits|-> <requests_per_unit|-> <unit|-> <key> <value> ...; replies [overall, [code, requests_per_unit, unit, name, remaining, duration_until_reset, shadow] ...].",
		Args: []Arg{
			{Name: "domain", Type: "key"},
			{Name: "hits_addend", Type: "integer"},
			{Name: "descriptor", Type: "block", Multiple: true, Sub: []Arg{
				{Name: "entries", Type: "integer"},
				{Name: "hits", Type: "string"},
				{Name: "requests_per_unit", Type: "string"},
				{Name: "unit", Type: "string"},
				{Name: "entry", Type: "block", Multiple: true, Sub: []Arg{
					{Name: "key", Type: "string"}, {Name: "value", Type: "string"},
				}},
			}},
		},
		run:   runShouldRateLimit,
		check: checkShouldRateLimit,
	}}
}

// rlsDescriptor is one descriptor of a RL.SHOULDRATELIMIT: its entries are
// req.entries[from:to].
type rlsDescriptor struct {
	from, to int
	// hits is the descriptor's cost.
	hits int64
	// limit and unit are the descriptor's own limit (unit NoUnit: none).
	limit int64
	unit  policy.Unit
}

// rlsRequest is a parsed RL.SHOULDRATELIMIT; entries point into the
// command's arguments.
type rlsRequest struct {
	entries []policy.Entry
	descs   []rlsDescriptor
}

// rlsUnits are the units a descriptor's own limit may name, shortest
// first.
var rlsUnits = []policy.Unit{policy.Second, policy.Minute, policy.Hour, policy.Day, policy.Week, policy.Month, policy.Year}

// parseRLSUnit reads a unit name in any case.
func parseRLSUnit(b []byte) (policy.Unit, bool) {
	for _, u := range rlsUnits {
		if resp.EqualFold(b, u.String()) {
			return u, true
		}
	}
	return policy.NoUnit, false
}

// parseShouldRateLimit reads the arguments after the command name; it
// returns the error reply, or "".
func parseShouldRateLimit(args [][]byte, req *rlsRequest) string {
	hits, ok := resp.ParseInt(args[2])
	if !ok || hits < 0 || hits > maxRLSValue {
		return "ERR hits_addend must be an integer in [0, 4294967295]"
	}
	hits = max(hits, 1)
	for i := 3; i < len(args); {
		if i+4 > len(args) {
			return "ERR syntax error: a descriptor is <entries> <hits|-> <requests_per_unit|-> <unit|-> <key> <value> ..."
		}
		n, ok := resp.ParseInt(args[i])
		if !ok || n < 1 || n > maxEntries {
			return "ERR a descriptor's entry count must be in [1, 256]"
		}
		d := rlsDescriptor{hits: hits}
		if string(args[i+1]) != "-" {
			v, ok := resp.ParseInt(args[i+1])
			if !ok || v < 0 || v > maxRLSValue {
				return "ERR a descriptor's hits must be '-' or an integer in [0, 4294967295]"
			}
			d.hits = v
		}
		rpu, unit := string(args[i+2]), string(args[i+3])
		switch {
		case rpu == "-" && unit == "-":
		case rpu == "-" || unit == "-":
			return "ERR a descriptor's limit needs both requests_per_unit and unit, or '-' for both"
		default:
			v, ok := resp.ParseInt(args[i+2])
			if !ok || v < 0 || v > maxRLSValue {
				return "ERR a descriptor's requests_per_unit must be an integer in [0, 4294967295]"
			}
			if d.unit, ok = parseRLSUnit(args[i+3]); !ok {
				return "ERR a descriptor's unit must be second, minute, hour, day, week, month or year"
			}
			d.limit = v
		}
		i += 4
		if int64(len(args)-i) < 2*n {
			return "ERR syntax error: a descriptor has fewer entries than its count"
		}
		if len(req.descs) == maxLimits {
			return "ERR too many descriptors (at most 64)"
		}
		if len(req.entries)+int(n) > maxEntries {
			return "ERR too many descriptor entries (at most 256)"
		}
		d.from = len(req.entries)
		for range n {
			if len(args[i]) == 0 {
				return "ERR a descriptor entry's key must not be empty"
			}
			req.entries = append(req.entries, policy.Entry{Key: view(args[i]), Value: view(args[i+1])})
			i += 2
		}
		d.to = len(req.entries)
		req.descs = append(req.descs, d)
	}
	return ""
}

// rlsScratch is a RL.SHOULDRATELIMIT's working memory beside checkScratch's.
type rlsScratch struct {
	descs []rlsDescriptor
	// of is the check of each descriptor (-1: none), unlimited whether its
	// rule is unlimited.
	of        []int
	unlimited []bool
}

func checkShouldRateLimit(m *Machine, args [][]byte) string {
	sc := m.scratch()
	defer m.release(sc)
	req := rlsRequest{entries: sc.entries}
	bad := parseShouldRateLimit(args, &req)
	sc.entries = req.entries
	return bad
}

// runShouldRateLimit is RL.SHOULDRATELIMIT (see above).
func runShouldRateLimit(x *exec, args [][]byte) {
	sc := x.m.scratch()
	defer x.m.release(sc)
	var rs rlsScratch
	req := rlsRequest{entries: sc.entries, descs: rs.descs}
	bad := parseShouldRateLimit(args, &req)
	sc.entries = req.entries
	if bad != "" {
		x.w.Error(bad)
		return
	}
	domain := view(args[1])
	d := x.m.rules().Domain(domain)
	for range req.descs {
		rs.of = append(rs.of, -1)
		rs.unlimited = append(rs.unlimited, false)
	}
	if d == nil {
		// An unknown domain limits nothing, as in Envoy (a descriptor's own
		// limit included: Envoy looks the domain up first).
		replyRLS(x, nil, &req, &rs, false, 0)
		return
	}
	for _, desc := range req.descs {
		var r *policy.Rule
		if desc.unit == policy.NoUnit {
			r = d.Match(req.entries[desc.from:desc.to])
		}
		sc.matched = append(sc.matched, r)
	}
	policy.ApplyReplaces(sc.matched)

	lookups := x.m.policyRecords.Load()
	// The keys go back to back in sc.keys, as RL.CHECK lays them out: a
	// counter key, then (for a rule, when such records may exist) its
	// RL.OVERRIDE key, then the domain's RL.SCALE key.
	type span struct{ counter, override [2]int }
	var spans []span
	for i, desc := range req.descs {
		entries := req.entries[desc.from:desc.to]
		r := sc.matched[i]
		var c limitCheck
		sp := span{override: [2]int{-1, -1}}
		switch {
		case desc.unit != policy.NoUnit:
			c = descriptorLimitCheck(desc)
			start := len(sc.keys)
			sc.keys = policy.AppendDescriptorKey(sc.keys, domain, entries)
			sc.keys = append(sc.keys, "#limit-"...)
			sc.keys = append(sc.keys, desc.unit.String()...)
			sp.counter = [2]int{start, len(sc.keys)}
		case r == nil:
			continue
		case r.Algorithm == policy.Unlimited:
			rs.unlimited[i] = true
			continue
		default:
			c = ruleCheck(r)
			start := len(sc.keys)
			sc.keys = r.AppendKey(sc.keys, entries)
			sp.counter = [2]int{start, len(sc.keys)}
			if lookups {
				start = len(sc.keys)
				sc.keys = policy.AppendDescriptorKey(sc.keys, domain, entries)
				sc.keys = append(sc.keys, overrideSuffix...)
				sp.override = [2]int{start, len(sc.keys)}
			}
		}
		c.cost, c.hasCost = desc.hits, true
		rs.of[i] = len(sc.checks)
		sc.checks = append(sc.checks, c)
		spans = append(spans, sp)
	}
	if len(sc.checks) == 0 {
		replyRLS(x, nil, &req, &rs, false, 0)
		return
	}
	scaleStart := len(sc.keys)
	sc.keys = policy.AppendDescriptorKey(sc.keys, domain, nil)
	sc.keys = append(sc.keys, scaleSuffix...)
	scaleKey := sc.keys[scaleStart:]
	checks := sc.checks
	for i := range checks {
		checks[i].key = sc.keys[spans[i].counter[0]:spans[i].counter[1]]
	}
	locks, domainSlot := checkSlots(&sc.locks, x.m.keys, checks, scaleKey, lookups)
	took := x.holdGroup(locks)
	defer x.releaseGroup(locks, took)
	now := x.lockChecks(checks)
	if lookups {
		s, _ := x.lockSlot(domainSlot)
		factor := scaleAt(s, scaleKey, now)
		for i := range checks {
			if spans[i].override[0] < 0 {
				continue // a descriptor's own limit is not scaled or overridden
			}
			if ov := overrideAt(s, sc.keys[spans[i].override[0]:spans[i].override[1]], now); ov != nil {
				checks[i].override(ov)
			}
			checks[i].scale(factor)
		}
	}
	binding, refused, err := multiCheck(x, now, 1, checks)
	if err != nil {
		x.error(err)
		return
	}
	if binding >= 0 {
		x.noteBinding(checks, binding, refused)
	}
	if refused {
		x.out.Limited = true
	}
	replyRLS(x, checks, &req, &rs, refused, now)
}

// descriptorLimitCheck is the check of a descriptor's own limit: a fixed
// window of the unit's length, as Envoy counts every limit (0 requests:
// always refused).
func descriptorLimitCheck(desc rlsDescriptor) limitCheck {
	c := limitCheck{window: desc.unit.Nanoseconds() / 1e9}
	if desc.limit == 0 {
		c.deny = true
		return c
	}
	c.kind = keyspace.KindFixedWindow
	c.win = window.Params{Limit: desc.limit, Window: desc.unit.Nanoseconds()}
	return c
}

// replyRLS writes RL.SHOULDRATELIMIT's reply: the overall code, then each
// descriptor's status.
func replyRLS(x *exec, checks []limitCheck, req *rlsRequest, rs *rlsScratch, refused bool, now int64) {
	x.w.Array(1 + len(req.descs))
	if refused {
		x.w.Int(RLSCodeOverLimit)
	} else {
		x.w.Int(RLSCodeOK)
	}
	for i, desc := range req.descs {
		x.w.Array(9)
		j := rs.of[i]
		if j < 0 {
			x.w.Int(RLSCodeOK)
			x.w.Int(-1)
			x.w.BulkString("")
			x.w.BulkString("")
			if rs.unlimited[i] {
				x.w.Int(rlsUnlimitedRemaining)
			} else {
				x.w.Int(0)
			}
			x.w.Int(-1)
			x.w.Int(0)
			x.w.Int(-1)
			x.w.Int(0)
			continue
		}
		c := &checks[j]
		shadowRule := c.rule != nil && c.rule.ShadowMode
		code := RLSCodeOK
		if c.res.Limited && !shadowRule {
			code = RLSCodeOverLimit
		}
		limit, unit, name := rlsLimit(c, desc)
		remaining := int64(0)
		if !c.res.Limited {
			remaining = c.res.Remaining
			if refused {
				// Nothing was charged: what remains is what was there.
				remaining = min(remaining+max(c.cost, 0), limit)
			}
		}
		x.w.Int(int64(code))
		x.w.Int(limit)
		x.w.BulkString(unit.String())
		x.w.BulkString(name)
		x.w.Int(remaining)
		x.w.Int(rlsReset(c, unit, now))
		x.w.Int(replyFlag(c.res.Limited && shadowRule))
		// The quota policy the status's remaining is counted against
		// (RateLimit-Policy): requests per unit over the unit, but for
		// GCRA its burst + 1 over the time that takes to refill.
		if c.kind == keyspace.KindGCRA && !c.deny {
			x.w.Int(c.gcra.MaxBurst + 1)
			x.w.Int(c.gcra.PolicyWindow())
		} else {
			x.w.Int(limit)
			x.w.Int(unit.Nanoseconds() / 1e9)
		}
	}
}

// rlsLimit is the limit a status reports: requests per unit as the check
// counts them (an RL.OVERRIDE or RL.SCALE applied), the unit whose length
// is its window (the rule's unit when none is), and the rule's name.
func rlsLimit(c *limitCheck, desc rlsDescriptor) (int64, policy.Unit, string) {
	if desc.unit != policy.NoUnit {
		return desc.limit, desc.unit, ""
	}
	r := c.rule
	limit, window := r.Limit, r.Window
	switch c.kind {
	case keyspace.KindFixedWindow, keyspace.KindSlidingCounter, keyspace.KindSlidingLog:
		limit, window = c.win.Limit, c.win.Window
	case keyspace.KindGCRA:
		limit, window = c.gcra.Count, c.gcra.Period
	case keyspace.KindQuota:
		limit = c.quotaLimit
	}
	unit := r.Unit
	if unit.Nanoseconds() != window {
		for _, u := range rlsUnits {
			if u.Nanoseconds() == window {
				unit = u
			}
		}
	}
	return limit, unit, r.Name
}

// rlsReset is duration_until_reset in seconds. A fixed window (and a limit
// of 0, which Envoy counts in one) resets when its window ends, counted as
// envoyproxy/ratelimit counts it: the window's length less the Unix second
// modulo that length. The other algorithms report their own reset_after.
func rlsReset(c *limitCheck, unit policy.Unit, now int64) int64 {
	var windowSeconds int64
	switch {
	case c.kind == keyspace.KindFixedWindow:
		windowSeconds = c.win.Window / 1e9
	case c.deny:
		windowSeconds = unit.Nanoseconds() / 1e9
	default:
		return limiter.Seconds(c.res.ResetAfter)
	}
	if windowSeconds <= 0 {
		return 0
	}
	sec := now / 1e9
	return windowSeconds - sec%windowSeconds
}
