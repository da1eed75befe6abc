package policy

import (
	"math"

	"github.com/sluice-rl/sluice/conc"
	"github.com/sluice-rl/sluice/gcra"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/window"
)

// Algorithm is how a rule counts. The zero value is invalid so that a rule
// built by hand without one is caught.
type Algorithm uint8

// The algorithms. Fixed is envoy's own meaning of a rate_limit block;
// Unlimited and Deny are envoy's two special cases made explicit.
const (
	// Fixed: at most Limit units per Window, windows aligned to multiples
	// of Window since the Unix epoch (window.Fixed, FW.CHECK).
	Fixed Algorithm = iota + 1
	// GCRA: Limit units per Window spread evenly, bursts of Burst+1
	// (gcra.Throttle, CL.THROTTLE).
	GCRA
	// Sliding: the sliding window counter (window.Counter, SW.CHECK).
	Sliding
	// SlidingExact: the sliding window log (SW.CHECK … EXACT).
	SlidingExact
	// Quota: Limit units per calendar Period in Zone, phased by Anchor
	// (quota.Check, QUOTA.CHECK).
	Quota
	// Concurrency: at most Limit leases in flight, each ending after Lease
	// (conc, CONC.ACQUIRE).
	Concurrency
	// Unlimited: envoy's `unlimited: true`; always allowed, nothing stored.
	Unlimited
	// Deny: envoy's `requests_per_unit: 0`; always refused (allowed in
	// shadow mode), nothing stored.
	Deny
)

var algorithmNames = [...]string{
	Fixed: "fixed", GCRA: "gcra", Sliding: "sliding", SlidingExact: "sliding-exact",
	Quota: "quota", Concurrency: "concurrency", Unlimited: "unlimited", Deny: "deny",
}

// String is the name used in the YAML extension and in counter keys.
func (a Algorithm) String() string {
	if a >= Fixed && a <= Deny {
		return algorithmNames[a]
	}
	return "invalid"
}

// Stateful reports whether the algorithm keeps a counter under a key.
func (a Algorithm) Stateful() bool { return a >= Fixed && a <= Concurrency }

// Unit is envoy's rate_limit.unit.
type Unit uint8

// The units envoy knows. Their lengths are envoy's: a month is 30 days and
// a year 365 days, as fixed windows aligned to the Unix epoch; only the
// quota algorithm reads hour…year as calendar periods.
const (
	NoUnit Unit = iota
	Second
	Minute
	Hour
	Day
	Week
	Month
	Year
)

var unitNames = [...]string{NoUnit: "", Second: "second", Minute: "minute", Hour: "hour",
	Day: "day", Week: "week", Month: "month", Year: "year"}

var unitSeconds = [...]int64{Second: 1, Minute: 60, Hour: 3600, Day: 86400,
	Week: 7 * 86400, Month: 30 * 86400, Year: 365 * 86400}

func (u Unit) String() string {
	if int(u) < len(unitNames) {
		return unitNames[u]
	}
	return "invalid"
}

// MaxMultiplier is the most units a window of u may span
// (unit_multiplier): Envoy's field is a uint32, and the window must fit in
// int64 nanoseconds. 0 for NoUnit.
func (u Unit) MaxMultiplier() int64 {
	n := u.Nanoseconds()
	if n == 0 {
		return 0
	}
	return min(math.MaxUint32, math.MaxInt64/n)
}

// Nanoseconds is the unit's length as envoy counts it.
func (u Unit) Nanoseconds() int64 {
	if u == NoUnit || int(u) >= len(unitSeconds) {
		return 0
	}
	return unitSeconds[u] * 1_000_000_000
}

// Rule is one rate limit of a domain: the rate_limit block of a descriptor
// together with where it sits. It is immutable once built; the integration
// layer reads it on every check and must not change it.
type Rule struct {
	// Domain is the domain the rule belongs to.
	Domain string
	// Name is rate_limit.name ("" if unnamed); Replaces are the names this
	// rule replaces (see ApplyReplaces).
	Name     string
	Replaces []string
	// Path is the descriptor path that leads to the rule, e.g.
	// "message_type=marketing/to_number" (a level without value shows the
	// key alone). It identifies the rule within its domain.
	Path string
	// File and Line locate the rule's descriptor in its source.
	File string
	Line int

	// Algorithm and its parameters, all integers. Limit is
	// requests_per_unit (for Concurrency: leases in flight). Window is the
	// window (Fixed, Sliding, SlidingExact) or period (GCRA) in ns: the
	// unit's length, or the extension's period. Burst is GCRA's max_burst.
	// Lease is Concurrency's lease in ns. Period, Anchor/HasAnchor and Zone
	// are Quota's calendar schedule.
	Algorithm Algorithm
	Limit     int64
	Window    int64
	Burst     int64
	Lease     int64
	Unit      Unit
	// Multiplier is rate_limit.unit_multiplier (1 when not given): the
	// window is Multiplier units long.
	Multiplier int64
	Period     quota.Period
	Anchor     int64
	HasAnchor  bool
	Zone       string

	// Envoy's flags. ShadowMode: count, never refuse. QuotaMode: a refusal
	// counts only when every quota-mode descriptor of the request is
	// refused. DetailedMetric and ValueToMetric are metric naming hints.
	ShadowMode     bool
	QuotaMode      bool
	DetailedMetric bool
	ValueToMetric  bool

	// shared holds, per descriptor level, the wildcard pattern whose
	// matches share one counter (share_threshold), or "" where the
	// request's own value goes into the counter key.
	shared   []string
	schedule quota.Schedule
	// prefix is the domain's part of every counter key after its hash
	// tag (see AppendKey), worked out once.
	prefix string
	// shardKey is the domain's shard_key: a descriptor entry whose value
	// picks the counter's slot (AppendKey); "" for none.
	shardKey string
}

// Depth is how many entries a descriptor must have to match the rule.
func (r *Rule) Depth() int { return len(r.shared) }

// ID names the rule in replies: its name if it has one, else its path.
func (r *Rule) ID() string {
	if r.Name != "" {
		return r.Name
	}
	return r.Path
}

// GCRALimit is the rule as gcra parameters (Algorithm GCRA).
func (r *Rule) GCRALimit() gcra.Limit {
	return gcra.Limit{MaxBurst: r.Burst, Count: r.Limit, Period: r.Window}
}

// WindowParams is the rule as window parameters (Fixed, Sliding,
// SlidingExact).
func (r *Rule) WindowParams() window.Params {
	return window.Params{Limit: r.Limit, Window: r.Window}
}

// ConcParams is the rule as concurrency parameters (Concurrency).
func (r *Rule) ConcParams() conc.Params {
	return conc.Params{Limit: r.Limit, Lease: r.Lease}
}

// QuotaSchedule is the rule's calendar schedule (Quota), built and
// validated when the file was parsed.
func (r *Rule) QuotaSchedule() quota.Schedule { return r.schedule }

// Equal reports whether two rules count the same way: same algorithm and
// parameters, same flags and same place. A reload can use it to tell which
// rules changed; counters do not depend on it (see AppendKey).
func (r *Rule) Equal(o *Rule) bool {
	if r.Domain != o.Domain || r.Path != o.Path || r.Name != o.Name ||
		r.Algorithm != o.Algorithm || r.Limit != o.Limit || r.Window != o.Window ||
		r.Burst != o.Burst || r.Lease != o.Lease || r.Unit != o.Unit || r.Multiplier != o.Multiplier ||
		r.Period != o.Period || r.Anchor != o.Anchor || r.HasAnchor != o.HasAnchor ||
		r.Zone != o.Zone || r.ShadowMode != o.ShadowMode || r.QuotaMode != o.QuotaMode ||
		r.DetailedMetric != o.DetailedMetric || r.ValueToMetric != o.ValueToMetric ||
		len(r.Replaces) != len(o.Replaces) || len(r.shared) != len(o.shared) {
		return false
	}
	for i := range r.Replaces {
		if r.Replaces[i] != o.Replaces[i] {
			return false
		}
	}
	for i := range r.shared {
		if r.shared[i] != o.shared[i] {
			return false
		}
	}
	return true
}
