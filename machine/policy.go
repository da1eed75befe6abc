package machine

import (
	"unsafe"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/resp"
)

// RL.CHECK: a request's descriptors matched against the loaded rules
// (package policy), every matched limit checked at one instant, all
// charged or none.

func policyCommands() []*Command {
	return []*Command{{
		Name: "rl.check", Decides: true, slots: allSlots, Arity: -5, Flags: []string{"write", "denyoom", "fast"},
		FirstKey: 1, LastKey: 1, Step: 1,
		Group: "sluice", Since: "1.1.0", Complexity: "O(D) where D is the number of descriptor entries",
		Summary: "Checks a request's descriptors against the rules of a domain, charging every matched limit or none: replies [limited, limit, remaining, retry_after, reset_after, rule, window].",
		Args: []Arg{
			{Name: "domain", Type: "key"},
			{Name: "cost", Type: "integer", Token: "COST", Optional: true},
			{Name: "descriptor", Type: "block", Token: "DESCRIPTOR", Multiple: true, Sub: []Arg{
				{Name: "entry", Type: "block", Multiple: true, Sub: []Arg{
					{Name: "key", Type: "string"}, {Name: "value", Type: "string"},
				}},
			}},
		},
		run: runRLCheck, check: checkRLCheck,
	}}
}

// maxEntries bounds the entries of one RL.CHECK, all descriptors together.
const maxEntries = 256

// descriptorRequest is RL.CHECK's arguments: entries point into the
// command's arguments (valid during the apply only) and bounds[i] is where
// descriptor i ends.
type descriptorRequest struct {
	cost    int64
	entries []policy.Entry
	bounds  []int
}

// parseDescriptors reads [COST n] DESCRIPTOR k v [k v …] [DESCRIPTOR …]
// from args (after the domain). A key spelled DESCRIPTOR starts the next
// descriptor, so it cannot be used as an entry key.
func parseDescriptors(args [][]byte, req *descriptorRequest) string {
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
func (m *Machine) rules() *policy.Set {
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

// checkScratch is the working memory of one RL.CHECK, reused through a
// pool so that a check allocates nothing (the buffers would escape to the
// heap if declared in the function).
type checkScratch struct {
	entries []policy.Entry
	bounds  []int
	matched []*policy.Rule
	keys    []byte
	checks  []limitCheck
	spans   [][2]int
	// locks are the slots the check holds: its counters' and its domain's.
	locks txLocks
}

func (m *Machine) scratch() *checkScratch {
	if sc, ok := m.checkScratch.Get().(*checkScratch); ok {
		return sc
	}
	return &checkScratch{
		entries: make([]policy.Entry, 0, 16), bounds: make([]int, 0, 8), matched: make([]*policy.Rule, 0, 8),
		keys: make([]byte, 0, 1024), checks: make([]limitCheck, 0, 4), spans: make([][2]int, 0, 4),
	}
}

func (m *Machine) release(sc *checkScratch) {
	clear(sc.entries) // no strings into old arguments kept
	clear(sc.matched)
	clear(sc.checks)
	sc.entries, sc.bounds, sc.matched = sc.entries[:0], sc.bounds[:0], sc.matched[:0]
	sc.keys, sc.checks, sc.spans = sc.keys[:0], sc.checks[:0], sc.spans[:0]
	m.checkScratch.Put(sc)
}

func checkRLCheck(m *Machine, args [][]byte) string {
	sc := m.scratch()
	defer m.release(sc)
	req := descriptorRequest{entries: sc.entries, bounds: sc.bounds}
	bad := parseDescriptors(args[2:], &req)
	sc.entries, sc.bounds = req.entries, req.bounds
	return bad
}

// runRLCheck is RL.CHECK <domain> [COST <n>] DESCRIPTOR <k> <v> [<k> <v> …] [DESCRIPTOR …].
func runRLCheck(x *exec, args [][]byte) {
	sc := x.m.scratch()
	defer x.m.release(sc)
	req := descriptorRequest{entries: sc.entries, bounds: sc.bounds}
	bad := parseDescriptors(args[2:], &req)
	sc.entries, sc.bounds = req.entries, req.bounds
	if bad != "" {
		x.w.Error(bad)
		return
	}
	domain := view(args[1])
	d := x.m.rules().Domain(domain)
	if d == nil {
		// A domain with no rules limits nothing, as in envoy.
		replyMulti(x, nil, -1, false)
		return
	}
	from := 0
	for _, end := range req.bounds {
		sc.matched = append(sc.matched, d.Match(req.entries[from:end]))
		from = end
	}
	policy.ApplyReplaces(sc.matched)

	// The counters spread over the slots (policy.Rule.AppendKey); the
	// descriptors' overrides and the domain's scale are in the domain's
	// slot ({domain} is their hash tag). The keys go back to back in
	// sc.keys: a counter key, then its override key, for each limit, then
	// the scale key (those two only when such records may exist).
	lookups := x.m.policyRecords.Load()
	from = 0
	for i, r := range sc.matched {
		end := req.bounds[i]
		entries := req.entries[from:end]
		from = end
		if r == nil || r.Algorithm == policy.Unlimited {
			continue
		}
		sc.checks = append(sc.checks, ruleCheck(r))
		start := len(sc.keys)
		sc.keys = r.AppendKey(sc.keys, entries)
		sc.spans = append(sc.spans, [2]int{start, len(sc.keys)})
		if lookups {
			sc.keys = policy.AppendDescriptorKey(sc.keys, domain, entries)
			sc.keys = append(sc.keys, overrideSuffix...)
		}
	}
	if len(sc.checks) == 0 {
		replyMulti(x, nil, -1, false)
		return
	}
	scaleStart := len(sc.keys)
	sc.keys = policy.AppendDescriptorKey(sc.keys, domain, nil)
	sc.keys = append(sc.keys, scaleSuffix...)
	scaleKey := sc.keys[scaleStart:]
	for i := range sc.checks {
		sc.checks[i].key = sc.keys[sc.spans[i][0]:sc.spans[i][1]]
	}

	checks := sc.checks
	locks, domainSlot := checkSlots(&sc.locks, x.m.keys, checks, scaleKey, lookups)
	took := x.holdGroup(locks)
	defer x.releaseGroup(locks, took)
	now := x.lockChecks(checks)
	if lookups {
		s, _ := x.lockSlot(domainSlot)
		factor := scaleAt(s, scaleKey, now)
		for i := range checks {
			overrideEnd := scaleStart
			if i+1 < len(checks) {
				overrideEnd = sc.spans[i+1][0]
			}
			if ov := overrideAt(s, sc.keys[sc.spans[i][1]:overrideEnd], now); ov != nil {
				checks[i].override(ov)
			}
			checks[i].scale(factor)
		}
	}
	binding, refused, err := multiCheck(x, now, req.cost, checks)
	if err != nil {
		x.error(err)
		return
	}
	replyMulti(x, checks, binding, refused)
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
