package decide

import (
	"bytes"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/machine/room"
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
//	<descriptor> := <entries> <hits|-> <requests_per_unit|-> <unit[*multiplier]|-> <key> <value> …
//
// Every descriptor says how many key/value entries it has, so keys and
// values can be any bytes. hits_addend is the request's (0 means 1); a
// descriptor's own hits (0 allowed: check without charging) replaces it,
// "-" when it has none. A requests_per_unit and unit (second … year) are
// the descriptor's own limit, which replaces its rule (a fixed window, as
// in Envoy); "-" "-" when it has none. A unit may be followed by
// "*<n>", Envoy's unit_multiplier: a window of n units (second*30).
//
// Reply: [overall, status…], overall 1 (OK) or 2 (OVER_LIMIT), Envoy's
// codes; each status [code, requests_per_unit, unit, name, remaining,
// duration_until_reset, shadow]: requests_per_unit -1, unit and name ""
// and duration -1 when no limit applies (no rule, or an unlimited one,
// whose remaining is 4294967295); shadow 1 when a shadow-mode rule would
// have refused it.

const (
	// rlsUnlimitedRemaining is the remaining Envoy reports for an unlimited
	// descriptor (math.MaxUint32).
	rlsUnlimitedRemaining = 1<<32 - 1
	// maxRLSValue bounds hits and requests_per_unit: they are uint32 in
	// Envoy's messages.
	maxRLSValue = 1<<32 - 1
)

func (m *Room) rlsCommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "rl.shouldratelimit", Arity: -9, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.2.0", Complexity: "O(D) where D is the number of descriptor entries",
			Summary: "Envoy's ShouldRateLimit: <domain> <hits_addend> then per descriptor <entries> <hits|-> <requests_per_unit|-> <unit|-> <key> <value> ...; replies [overall, [code, requests_per_unit, unit, name, remaining, duration_until_reset, shadow] ...].",
			Args: []cmdspec.Arg{
				{Name: "domain", Type: "key"},
				{Name: "hits_addend", Type: "integer"},
				{Name: "descriptor", Type: "block", Multiple: true, Sub: []cmdspec.Arg{
					{Name: "entries", Type: "integer"},
					{Name: "hits", Type: "string"},
					{Name: "requests_per_unit", Type: "string"},
					{Name: "unit", Type: "string"},
					{Name: "entry", Type: "block", Multiple: true, Sub: []cmdspec.Arg{
						{Name: "key", Type: "string"}, {Name: "value", Type: "string"},
					}},
				}},
			}}, Decides: true, Stores: m.storesCounters, Slots: room.AllSlots, Run: m.run(runShouldRateLimit),
		Check: m.check(checkShouldRateLimit),
	}}
}

// rlsDescriptor is one descriptor of a RL.SHOULDRATELIMIT: its entries are
// req.entries[from:to].
type rlsDescriptor struct {
	from, to int
	// hits is the descriptor's cost; when negative is set, the units it
	// gives back instead (Envoy's is_negative_hits).
	hits     int64
	negative bool
	// limit and unit are the descriptor's own limit (unit NoUnit: none),
	// over a window of mult units (Envoy's unit_multiplier; 1 otherwise).
	limit int64
	unit  policy.Unit
	mult  int64
}

// windowNanos is the length of a descriptor's own limit's window.
func (d rlsDescriptor) windowNanos() int64 { return d.unit.Nanoseconds() * d.mult }

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
func parseShouldRateLimit(m *Room, args [][]byte, req *plan) string {
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
		d := rlsDescriptor{hits: hits, mult: 1}
		if string(args[i+1]) != "-" {
			v, ok := resp.ParseInt(args[i+1])
			if !ok || v < -maxRLSValue || v > maxRLSValue || (v < 0 && args[i+1][0] != '-') {
				return "ERR a descriptor's hits must be '-' or an integer in [-4294967295, 4294967295]"
			}
			d.hits, d.negative = v, v < 0
			if d.negative {
				d.hits = -v
			}
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
			name, mult, many := bytes.Cut(args[i+3], []byte("*"))
			if d.unit, ok = parseRLSUnit(name); !ok {
				return "ERR a descriptor's unit must be second, minute, hour, day, week, month or year"
			}
			if many && m.core.Level() < 1 {
				// Members before level 1 read the word as a unit and
				// refuse it: no such entry may reach the log until every
				// member reads it alike (levels).
				return "ERR a unit multiplier (<unit>*<n>) needs every member of the group at sluice 0.5.0 or later (apply level 1); try again once the group is upgraded"
			}
			if many {
				n, ok := resp.ParseInt(mult)
				if !ok || n < 1 || n > d.unit.MaxMultiplier() {
					return "ERR a descriptor's unit multiplier must be an integer in [1, 4294967295] whose window fits in 292 years"
				}
				d.mult = n
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

func checkShouldRateLimit(m *Room, args [][]byte) string {
	p := m.plan()
	defer m.release(p)
	return parseShouldRateLimit(m, args, p)
}

// runShouldRateLimit is RL.SHOULDRATELIMIT (see above). Its typed result,
// one room.RLSStatus per descriptor, is the apply's room.Outcome.Statuses.
func runShouldRateLimit(x *apply, args [][]byte) { shouldRateLimit(x, args, nil) }

// planShouldRateLimit plans the descriptors parseShouldRateLimit read:
// each matched against the domain's rules (or its own limit), p.of the
// check of each (-1: none). An unknown domain limits nothing, as in Envoy
// (a descriptor's own limit included: Envoy looks the domain up first).
func (m *Room) planShouldRateLimit(p *plan, domain string, records bool) {
	p.cost = 1 // every descriptor has its own hits
	d := m.rules().Domain(domain)
	if d == nil {
		return
	}
	for _, desc := range p.descs {
		var r *policy.Rule
		if desc.unit == policy.NoUnit {
			r = d.Match(p.entries[desc.from:desc.to])
		}
		p.matched = append(p.matched, r)
	}
	policy.ApplyReplaces(p.matched)
	p.forDomain(domain, records)
	for i, desc := range p.descs {
		entries := p.entries[desc.from:desc.to]
		var c *limitCheck
		switch r := p.matched[i]; {
		case desc.unit != policy.NoUnit:
			c = p.addOwnLimit(desc, entries)
		case !limits(r):
			p.of = append(p.of, -1)
			continue
		default:
			c = p.addRule(r, entries)
		}
		c.cost, c.hasCost = desc.hits, true
		if desc.negative {
			// A refund: it takes part in no decision (checked at no
			// cost, never refusing); its units go back afterwards.
			c.cost, c.shadow = 0, true
		}
		p.of = append(p.of, len(p.checks)-1)
	}
}

// startHold, when set, makes the holder that keeps what the decision
// charges (nil holder: nothing to keep).
type startHold func(p *plan, domain string, now int64) (holder, error)

// shouldRateLimit decides an RL.SHOULDRATELIMIT; with held, it also keeps
// what it charged as a reservation (a group's part of a check across
// groups, RL.PART RESERVE).
func shouldRateLimit(x *apply, args [][]byte, held startHold) {
	p := x.m.plan()
	defer x.m.release(p)
	if bad := parseShouldRateLimit(x.m, args, p); bad != "" {
		x.Fail(bad)
		return
	}
	domain := view(args[1])
	x.m.planShouldRateLimit(p, domain, x.m.policyRecords.Load())
	var v verdict
	if len(p.checks) > 0 {
		p.seal()
		now, ds, took, err := x.lockPlan(p)
		if err != nil {
			x.Error(err)
			return
		}
		defer x.ReleaseGroup(&p.locks, took)
		var hold holder
		if held != nil {
			if hold, err = held(p, string(domain), now); err != nil {
				x.Error(err)
				return
			}
		}
		if v, err = x.decideLocked(p, now, ds, hold); err == nil {
			err = x.negativeHits(p, now)
		}
		if err != nil {
			x.Error(err)
			return
		}
		if v.binding >= 0 {
			x.noteBinding(p.checks, v.binding, v.refused)
		}
		x.out.Limited = v.refused
	}
	// The statuses leave the apply (room.Outcome.Statuses): the caller's, never
	// a buffer the next apply writes.
	statuses := make([]room.RLSStatus, 0, len(p.descs))
	for i, desc := range p.descs {
		var c *limitCheck
		unlimited := false
		if i < len(p.of) && p.of[i] >= 0 {
			c = &p.checks[p.of[i]]
		} else if i < len(p.matched) && p.matched[i] != nil {
			unlimited = p.matched[i].Algorithm == policy.Unlimited
		}
		st := rlsStatus(c, desc, unlimited, v.refused, v.now)
		if desc.negative {
			st.Code = room.RLSCodeOK // a refund is never over the limit
		}
		statuses = append(statuses, st)
	}
	x.out.Statuses = statuses
	room.WriteRLS(x.w, v.refused, statuses)
}

// negativeHits gives back the units of the plan's negative descriptors
// (Envoy's is_negative_hits), whatever the decision, as refunds of the
// latest charge (HeldLimit.Anchor -1): GCRA's TAT moves back by the units
// (never before now), the window kinds give them back off the
// (sub-)window that counted last (a sliding log off its newest entry), a
// quota off its current period — floored at nothing counted. Each status then reports
// the state after it.
func (x *apply) negativeHits(p *plan, now int64) error {
	for i, desc := range p.descs {
		if !desc.negative || i >= len(p.of) || p.of[i] < 0 {
			continue
		}
		j := p.of[i]
		c := &p.checks[j]
		if c.deny {
			continue
		}
		l := limiters.Charge{Key: c.key, Kind: c.kind, Units: desc.hits, Anchor: -1, Step: c.win.Window, Limit: c.win.Limit}
		if c.kind == keyspace.KindGCRA {
			l.Step = c.gcra.EmissionInterval()
		}
		if _, err := x.m.limiters.Refund(x, &l, desc.hits, now); err != nil {
			return err
		}
		if err := c.evaluate(x.m, c.slot, now, 0, nil, x.bufs.logScratch(j)); err != nil {
			return err
		}
	}
	return nil
}

// descriptorLimitCheck is the check of a descriptor's own limit: a fixed
// window of the unit's length, as Envoy counts every limit (0 requests:
// always refused).
func descriptorLimitCheck(desc rlsDescriptor) limitCheck {
	c := limitCheck{window: desc.windowNanos() / 1e9}
	if desc.limit == 0 {
		c.deny = true
		return c
	}
	c.kind = keyspace.KindFixedWindow
	c.win = window.Params{Limit: desc.limit, Window: desc.windowNanos()}
	return c
}
