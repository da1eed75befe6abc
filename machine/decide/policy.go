package decide

import (
	"unsafe"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/resp"
)

// RL.CHECK: a request's descriptors matched against the loaded rules
// (package policy), every matched limit checked at one instant, all
// charged or none.

func (m *Room) policyCommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "rl.check", Arity: -5, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.1.0", Complexity: "O(D) where D is the number of descriptor entries",
			Summary: "Checks a request's descriptors against the rules of a domain, charging every matched limit or none: replies [limited, limit, remaining, retry_after, reset_after, rule, window].",
			Args: []cmdspec.Arg{
				{Name: "domain", Type: "key"},
				{Name: "cost", Type: "integer", Token: "COST", Optional: true},
				{Name: "descriptor", Type: "block", Token: "DESCRIPTOR", Multiple: true, Sub: []cmdspec.Arg{
					{Name: "entry", Type: "block", Multiple: true, Sub: []cmdspec.Arg{
						{Name: "key", Type: "string"}, {Name: "value", Type: "string"},
					}},
				}},
			}}, Decides: true, Stores: m.storesCounters, Slots: room.AllSlots, Run: m.run(runRLCheck), Check: m.check(checkRLCheck),
	}}
}

// maxEntries bounds the entries of one RL.CHECK, all descriptors together.
const maxEntries = 256

// parseDescriptors reads [COST n] DESCRIPTOR k v [k v …] [DESCRIPTOR …]
// from args (after the domain). A key spelled DESCRIPTOR starts the next
// descriptor, so it cannot be used as an entry key.
func parseDescriptors(args [][]byte, req *plan) string {
	req.cost = 1
	i := 0
	if i < len(args) && resp.EqualFold(args[i], "cost") {
		if i+1 >= len(args) {
			return resp.ErrSyntax
		}
		n, ok := resp.ParseInt(args[i+1])
		if !ok {
			return resp.ErrNotInteger
		}
		if n < 0 {
			return "ERR COST must not be negative"
		}
		req.cost = n
		i += 2
	}
	if i >= len(args) || !resp.EqualFold(args[i], "descriptor") {
		return "ERR syntax error: expected DESCRIPTOR <key> <value> [<key> <value> ...]"
	}
	for i < len(args) {
		if !resp.EqualFold(args[i], "descriptor") {
			return "ERR syntax error: expected DESCRIPTOR <key> <value> [<key> <value> ...]"
		}
		i++
		start := len(req.entries)
		for i < len(args) && !resp.EqualFold(args[i], "descriptor") {
			if i+1 >= len(args) || resp.EqualFold(args[i+1], "descriptor") {
				return "ERR DESCRIPTOR needs <key> <value> pairs: '" + resp.Clip(args[i], 64) + "' has no value"
			}
			if len(req.entries) == maxEntries {
				return "ERR too many descriptor entries (at most 256)"
			}
			req.entries = append(req.entries, policy.Entry{Key: view(args[i]), Value: view(args[i+1])})
			i += 2
		}
		if len(req.entries) == start {
			return "ERR DESCRIPTOR needs at least one <key> <value> pair"
		}
		if len(req.bounds) == maxLimits {
			return "ERR too many descriptors (at most 64)"
		}
		req.bounds = append(req.bounds, len(req.entries))
	}
	return ""
}

// view is b as a string without a copy. The string must not outlive the
// apply (matching and key building only read it).
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// rules is the loaded rule set, or nil.
func (m *Room) rules() *policy.Set {
	if st := m.ruleState.Load(); st != nil {
		return st.Set
	}
	return nil
}

// Suffixes of the policy records' keys in a domain's slot.
const (
	overrideSuffix = "#override"
	scaleSuffix    = "#scale"
)

func checkRLCheck(m *Room, args [][]byte) string {
	p := m.plan()
	defer m.release(p)
	return parseDescriptors(args[2:], p)
}

// runRLCheck is RL.CHECK <domain> [COST <n>] DESCRIPTOR <k> <v> [<k> <v> …] [DESCRIPTOR …].
func runRLCheck(x *apply, args [][]byte) {
	p := x.m.plan()
	defer x.m.release(p)
	if bad := parseDescriptors(args[2:], p); bad != "" {
		x.Fail(bad)
		return
	}
	domain := view(args[1])
	d := x.m.rules().Domain(domain)
	if d == nil {
		// A domain with no rules limits nothing, as in envoy.
		x.answerCheck(room.NoLimit)
		return
	}
	p.forDomain(domain, x.m.policyRecords.Load())
	p.addMatched(d)
	if len(p.checks) == 0 {
		x.answerCheck(room.NoLimit)
		return
	}
	p.seal()
	v, err := x.decide(p)
	if err != nil {
		x.Error(err)
		return
	}
	x.answerCheck(x.checkResult(p.checks, v))
}

// ruleCheck is the check rule r asks for (key not yet set).
func ruleCheck(r *policy.Rule) limitCheck {
	c := limitCheck{name: r.ID(), window: limiter.Seconds(r.Window), shadow: r.ShadowMode, quotaMode: r.QuotaMode, rule: r}
	switch r.Algorithm {
	case policy.Fixed:
		c.kind, c.win = keyspace.KindFixedWindow, r.WindowParams()
	case policy.Sliding:
		c.kind, c.win = keyspace.KindSlidingCounter, r.WindowParams()
	case policy.SlidingExact:
		c.kind, c.win = keyspace.KindSlidingLog, r.WindowParams()
	case policy.GCRA:
		c.kind, c.gcra = keyspace.KindGCRA, r.GCRALimit()
	case policy.Quota:
		c.kind, c.quotaLimit, c.sched = keyspace.KindQuota, r.Limit, r.QuotaSchedule()
	default: // Deny; ParseRules refuses the others
		c.deny = true
	}
	return c
}

// override replaces c's limit by o's.
func (c *limitCheck) override(o *OverrideState) {
	switch c.kind {
	case keyspace.KindFixedWindow, keyspace.KindSlidingCounter, keyspace.KindSlidingLog:
		c.win.Limit, c.win.Window = o.Limit, o.Window
		c.window = limiter.Seconds(o.Window)
	case keyspace.KindGCRA:
		c.gcra.Count, c.gcra.Period = o.Limit, o.Window
		if o.Burst >= 0 {
			c.gcra.MaxBurst = o.Burst
		}
		c.window = limiter.Seconds(o.Window)
	case keyspace.KindQuota:
		c.quotaLimit = o.Limit
	}
}

// scale applies a scale factor (millionths) to c's limit.
func (c *limitCheck) scale(factor int64) {
	if factor >= ScaleUnit {
		return
	}
	switch c.kind {
	case keyspace.KindFixedWindow, keyspace.KindSlidingCounter, keyspace.KindSlidingLog:
		c.win.Limit = Scale(c.win.Limit, factor)
	case keyspace.KindGCRA:
		c.gcra.Count = Scale(c.gcra.Count, factor)
		c.gcra.MaxBurst = Scale(c.gcra.MaxBurst+1, factor) - 1
	case keyspace.KindQuota:
		c.quotaLimit = Scale(c.quotaLimit, factor)
	}
}

// overrideAt is the override stored under key if it applies at now.
func overrideAt(s *keyspace.Slot, key []byte, now int64) *OverrideState {
	e, ok := s.Get(key, now)
	if !ok || e.Kind() != keyspace.KindOverride {
		return nil
	}
	o, _ := s.Object(e).(*OverrideState)
	if o == nil || !o.ActiveAt(now) {
		return nil
	}
	return o
}

// scaleAt is the scale factor stored under key at now (ScaleUnit if none).
func scaleAt(s *keyspace.Slot, key []byte, now int64) int64 {
	e, ok := s.Get(key, now)
	if !ok || e.Kind() != keyspace.KindScale {
		return ScaleUnit
	}
	st, _ := s.Object(e).(*ScaleState)
	if st == nil {
		return ScaleUnit
	}
	return st.At(now)
}

// storesCounters reports whether an RL.CHECK or RL.SHOULDRATELIMIT would
// create a counter: one of the limits it matches has none yet.
func (m *Room) storesCounters(keys room.View, args [][]byte, now int64) bool {
	p := m.plan()
	defer m.release(p)
	domain := view(args[1])
	if resp.EqualFold(args[0], "rl.shouldratelimit") {
		if parseShouldRateLimit(m, args, p) != "" {
			return true
		}
		m.planShouldRateLimit(p, domain, false)
	} else {
		if parseDescriptors(args[2:], p) != "" {
			return true
		}
		d := m.rules().Domain(domain)
		if d == nil {
			return false // nothing is limited, nothing stored
		}
		p.forDomain(domain, false)
		p.addMatched(d)
	}
	for _, sp := range p.spans {
		if !keys.Exists(p.span(sp.counter), now) {
			return true
		}
	}
	for i := range p.checks {
		if p.checks[i].kind == keyspace.KindSlidingLog {
			return true // an exact log grows by each request it admits
		}
	}
	return false
}
