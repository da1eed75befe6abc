package commands

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/policy"
)

// RuleStats counts RL.CHECK decisions by the rule the reply names, and the
// refusals of shadow-mode rules (which refuse nothing). Rules come from
// configuration, so the set of names is bounded; it keeps the names of
// rules a reload removed until CONFIG RESETSTAT.
type RuleStats struct {
	m sync.Map // ruleID → *ruleCounters
}

type ruleID struct{ domain, rule string }

type ruleCounters struct{ allowed, limited, shadowRefused atomic.Int64 }

// RuleCount is one rule's counts.
type RuleCount struct {
	Domain, Rule                    string
	Allowed, Limited, ShadowRefused int64
}

func (s *RuleStats) counters(r *policy.Rule) *ruleCounters {
	id := ruleID{r.Domain, r.ID()}
	if c, ok := s.m.Load(id); ok {
		return c.(*ruleCounters)
	}
	c, _ := s.m.LoadOrStore(id, &ruleCounters{})
	return c.(*ruleCounters)
}

// count records the rules of one apply's outcome.
func (s *RuleStats) count(out machine.Outcome) {
	if out.Rule != nil {
		if out.Limited {
			s.counters(out.Rule).limited.Add(1)
		} else {
			s.counters(out.Rule).allowed.Add(1)
		}
	}
	if out.Shadow != nil {
		s.counters(out.Shadow).shadowRefused.Add(1)
	}
}

// Counts lists every rule's counts, sorted by domain and rule.
func (s *RuleStats) Counts() []RuleCount {
	var out []RuleCount
	s.m.Range(func(k, v any) bool {
		id, c := k.(ruleID), v.(*ruleCounters)
		out = append(out, RuleCount{Domain: id.domain, Rule: id.rule, Allowed: c.allowed.Load(),
			Limited: c.limited.Load(), ShadowRefused: c.shadowRefused.Load()})
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Domain != out[j].Domain {
			return out[i].Domain < out[j].Domain
		}
		return out[i].Rule < out[j].Rule
	})
	return out
}

func (s *RuleStats) reset() { s.m.Clear() }
