package decide

import (
	"strconv"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/placement"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/policy"
)

// The decision core. Every limiter command that checks several limits at
// once (RL.CHECK, RL.CHECKALL, RL.SHOULDRATELIMIT) goes through the same
// three steps, as rate.Limiter's reserveN works a reservation out before
// it takes it:
//
//   - plan: the limits the request asks for (rules matched, or limits
//     spelled out), each with its counter key, and where the domain's
//     records (RL.OVERRIDE, RL.SCALE) that may change them are;
//   - decide: lock every slot involved, read the overrides and the scale,
//     evaluate every limit at one instant (multiCheck);
//   - commit: store every next state, or none (commitAll).
//
// The result is typed (verdict, and each limitCheck's result); the commands
// are thin callers that parse their arguments into a plan and format the
// typed result (room.CheckResult, room.RLSStatus) as their reply.

// plan is a multi-limit check ready to decide, and the working memory the
// commands parse into. Plans are pooled (Room.plan), so a check
// allocates nothing.
type plan struct {
	// cost is the request's cost (a check with hasCost has its own).
	cost int64
	// checks are the limits; a check's key is set by seal from spans, or
	// by the caller (RL.CHECKALL's keys are its arguments).
	checks []limitCheck
	// keys holds the keys the plan made, back to back; spans[i] says where
	// check i's counter key and its override key are (no override: the
	// empty span).
	keys  []byte
	spans []keySpan
	// records is set when the domain's overrides and scale are read
	// (some may exist); scale is where its scale key is in keys.
	records bool
	domain  string
	scale   keySpan
	// anchor, when set, is a key of the domain's slot the plan holds even
	// with no records to read (RL.RESERVE's reservation).
	anchor []byte

	// The parsed request: entries point into the command's arguments,
	// bounds[i] is where descriptor i ends (RL.CHECK), descs are
	// RL.SHOULDRATELIMIT's descriptors, matched the rule of each.
	entries []policy.Entry
	bounds  []int
	descs   []rlsDescriptor
	matched []*policy.Rule
	// of is the check of each RL.SHOULDRATELIMIT descriptor (-1: none).
	of []int
	// locks are the slots the check holds: its counters' and its domain's.
	locks room.SlotLocks
	// held is the working memory of what keeps the decision's charge
	// (the reserve room's holder), pooled with the plan; nil until one
	// is needed.
	held holdScratch
}

// holdScratch is a holder's working memory, kept with a pooled plan.
type holdScratch interface {
	// reset forgets what was held and keeps the buffers.
	reset()
}

// keySpan is where a key is in plan.keys ([0, 0): none); for a check, its
// counter key and its override key.
type keySpan struct{ counter, override [2]int }

// verdict is what deciding a plan found.
type verdict struct {
	// now is the instant every limit was checked at.
	now int64
	// binding is the check the reply reports (-1: none); refused whether
	// the request was refused (and so nothing charged).
	binding int
	refused bool
}

func (m *Room) plan() *plan {
	if p, ok := m.plans.Get().(*plan); ok {
		return p
	}
	return &plan{
		entries: make([]policy.Entry, 0, 16), bounds: make([]int, 0, 8), matched: make([]*policy.Rule, 0, 8),
		keys: make([]byte, 0, 1024), checks: make([]limitCheck, 0, 4), spans: make([]keySpan, 0, 4),
	}
}

func (m *Room) release(p *plan) {
	clear(p.entries) // no strings into old arguments kept
	clear(p.matched)
	clear(p.checks)
	p.entries, p.bounds, p.descs, p.matched, p.of = p.entries[:0], p.bounds[:0], p.descs[:0], p.matched[:0], p.of[:0]
	p.keys, p.checks, p.spans = p.keys[:0], p.checks[:0], p.spans[:0]
	p.records, p.domain, p.scale, p.cost, p.anchor = false, "", keySpan{}, 0, nil
	if p.held != nil {
		p.held.reset()
	}
	m.plans.Put(p)
}

// forDomain starts planning a request of domain; records says whether its
// overrides and scale are to be read.
func (p *plan) forDomain(domain string, records bool) {
	p.domain, p.records = domain, records
}

// addRule plans the limit rule r puts on a descriptor (entries as
// matched), with the descriptor's override when records may exist.
func (p *plan) addRule(r *policy.Rule, entries []policy.Entry) *limitCheck {
	p.checks = append(p.checks, ruleCheck(r))
	var sp keySpan
	start := len(p.keys)
	p.keys = r.AppendKey(p.keys, entries)
	sp.counter = [2]int{start, len(p.keys)}
	if p.records {
		start = len(p.keys)
		p.keys = policy.AppendDescriptorKey(p.keys, p.domain, entries)
		p.keys = append(p.keys, overrideSuffix...)
		sp.override = [2]int{start, len(p.keys)}
	}
	p.spans = append(p.spans, sp)
	return &p.checks[len(p.checks)-1]
}

// addMatched matches each descriptor RL.CHECK's syntax parsed (entries,
// bounds) against domain d's rules, replaces applied, and plans the limit
// of every rule that limits (not an unlimited one); p.matched holds each
// descriptor's rule. Call forDomain first.
func (p *plan) addMatched(d *policy.Domain) {
	from := 0
	for _, end := range p.bounds {
		p.matched = append(p.matched, d.Match(p.entries[from:end]))
		from = end
	}
	policy.ApplyReplaces(p.matched)
	from = 0
	for i, r := range p.matched {
		end := p.bounds[i]
		if limits(r) {
			p.addRule(r, p.entries[from:end])
		}
		from = end
	}
}

// limits reports a matched rule that limits (nil: no rule matched).
func limits(r *policy.Rule) bool { return r != nil && r.Algorithm != policy.Unlimited }

// addOwnLimit plans a descriptor's own limit (RL.SHOULDRATELIMIT's
// requests_per_unit and unit): no override or scale applies to it.
func (p *plan) addOwnLimit(desc rlsDescriptor, entries []policy.Entry) *limitCheck {
	p.checks = append(p.checks, descriptorLimitCheck(desc))
	start := len(p.keys)
	p.keys = policy.AppendDescriptorKey(p.keys, p.domain, entries)
	p.keys = append(p.keys, "#limit-"...)
	p.keys = append(p.keys, desc.unit.String()...)
	if desc.mult > 1 {
		// Another window is another counter.
		p.keys = append(p.keys, '*')
		p.keys = strconv.AppendInt(p.keys, desc.mult, 10)
	}
	p.spans = append(p.spans, keySpan{counter: [2]int{start, len(p.keys)}})
	return &p.checks[len(p.checks)-1]
}

// seal finishes a plan made with addRule and addOwnLimit: the checks get
// their keys (keys no longer grows) and the domain's scale key is made.
func (p *plan) seal() {
	if p.records {
		start := len(p.keys)
		p.keys = policy.AppendDescriptorKey(p.keys, p.domain, nil)
		p.keys = append(p.keys, scaleSuffix...)
		p.scale.counter = [2]int{start, len(p.keys)}
	}
	for i := range p.checks {
		p.checks[i].key = p.span(p.spans[i].counter)
	}
}

func (p *plan) span(s [2]int) []byte { return p.keys[s[0]:s[1]] }

// decide checks every limit of the plan at one instant and charges all or
// none: it holds the slots of the counters (and the domain's, whose
// overrides and scale change the limits), reads those records, evaluates
// each limit and commits. The checks hold each limit's result.
func (x *apply) decide(p *plan) (verdict, error) {
	now, domain, took, err := x.lockPlan(p)
	if err != nil {
		return verdict{}, err
	}
	defer x.ReleaseGroup(&p.locks, took)
	return x.decideLocked(p, now, domain, nil)
}

// lockPlan holds the slots of the plan's counters and, when it reads the
// domain's records or has an anchor there, the domain's slot (returned;
// nil otherwise), and
// returns the instant to decide at. Release with ReleaseGroup(&p.locks,
// took).
func (x *apply) lockPlan(p *plan) (now int64, domain *keyspace.Slot, took bool, err error) {
	domainKey := p.anchor
	if p.records {
		domainKey = p.span(p.scale.counter)
	}
	if err := x.m.fenceChecks(p.checks); err != nil {
		return 0, nil, false, err // nothing locked
	}
	locks, domainSlot := checkSlots(&p.locks, x.m.keys, p.checks, domainKey, domainKey != nil)
	took = x.HoldGroup(locks)
	now = x.lockChecks(p.checks)
	if domainKey != nil {
		domain, now = x.LockSlot(domainSlot)
	}
	return now, domain, took, nil
}

// holder keeps something (a reservation) with a decision that admits:
// hold runs once every limit admits and before anything is stored (an
// error stores nothing), and undo puts it back should the commit then
// fail. hold may insert into the slots the plan holds, and marks the
// checks whose records may have moved (limitCheck.moved).
type holder interface {
	hold(checks []limitCheck) error
	undo()
}

// decideLocked is decide for a plan lockPlan holds.
func (x *apply) decideLocked(p *plan, now int64, domain *keyspace.Slot, hold holder) (verdict, error) {
	x.adjustLimits(p, now, domain)
	binding, refused, err := multiCheck(x, now, p.cost, p.checks, hold)
	return verdict{now: now, binding: binding, refused: refused}, err
}

// adjustLimits applies the domain's overrides and scale (its records, in
// domain, held) to the plan's limits, once per decision.
func (x *apply) adjustLimits(p *plan, now int64, domain *keyspace.Slot) {
	checks := p.checks
	if p.records {
		s := domain
		factor := scaleAt(s, p.span(p.scale.counter), now)
		for i := range checks {
			ov := p.spans[i].override
			if ov[1] == 0 {
				continue // a descriptor's own limit is not scaled or overridden
			}
			if o := overrideAt(s, p.span(ov), now); o != nil {
				checks[i].override(o)
			}
			checks[i].scale(factor)
		}
	}
}

// fenceChecks refuses a multi-limit check whose counters sit in a slot
// this group does not own (nil: all owned). Such a check reached the log
// because the member that routed it had not yet heard that the slot moved
// (a check whose counters it knew to be elsewhere it splits across the
// groups): nothing is charged, and asked again it goes where the counters
// are now — TRYAGAIN, which cluster clients retry, where CROSSSLOT would
// tell them the request can never succeed.
func (m *Room) fenceChecks(checks []limitCheck) error {
	for i := range checks {
		if s, o, ok := m.unowned(checks[i].key); ok {
			return room.FenceError(countersMoved(s, o))
		}
	}
	return nil
}

// countersMoved is the reply to a check with a counter in slot s, which
// another group owns now.
func countersMoved(s int, o *placement.Ownership) string {
	return "TRYAGAIN the check's counters are not all in this group's slots (slot " + strconv.Itoa(s) +
		", cluster map epoch " + strconv.FormatUint(o.Epoch, 10) + "): asked again, it goes where they are now"
}
