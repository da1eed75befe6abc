package policy

import (
	"math"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-rl/sluice/conc"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/window"
)

// maxRequestsPerUnit is envoy's bound: requests_per_unit is a uint32 there.
const maxRequestsPerUnit = math.MaxUint32

var (
	rateLimitFields = []string{"unit", "unit_multiplier", "requests_per_unit", "unlimited", "name", "replaces", "sluice"}
	extensionFields = []string{"algorithm", "burst", "period", "lease", "anchor", "zone"}
)

// rateLimit reads a rate_limit block into a Rule at the given path.
func (p *parser) rateLimit(n *yaml.Node, path []level, line int) (*Rule, error) {
	if p.rules >= p.lim.MaxRules {
		return nil, p.fail(n.Line, ErrTooLarge, "more than %d rate limits in one file", p.lim.MaxRules)
	}
	p.rules++
	fs, err := p.fields(n, "rate_limit", rateLimitFields...)
	if err != nil {
		return nil, err
	}
	r := &Rule{Domain: p.dom.Name, File: p.file, Line: line, shared: make([]string, len(path)),
		prefix: string(appendLenPrefixed(nil, p.dom.Name, ':')), shardKey: p.dom.ShardKey}
	parts := make([]string, len(path))
	for i, lv := range path {
		parts[i] = lv.path
		r.shared[i] = lv.shared
	}
	r.Path = strings.Join(parts, "/")

	if r.Name, err = p.text(fs["name"], "name"); err != nil {
		return nil, err
	}
	if err := p.replaces(fs["replaces"], r); err != nil {
		return nil, err
	}
	unitText, err := p.text(fs["unit"], "unit")
	if err != nil {
		return nil, err
	}
	if unitText != "" {
		if r.Unit = parseUnit(unitText); r.Unit == NoUnit {
			return nil, p.fail(fs["unit"].value.Line, ErrInvalid,
				"invalid unit %q (want second, minute, hour, day, week, month or year)", unitText)
		}
	}

	r.Multiplier = 1
	if f, ok := fs["unit_multiplier"]; ok {
		if r.Unit == NoUnit {
			return nil, p.fail(f.key.Line, ErrInvalid, "unit_multiplier needs a unit")
		}
		if r.Multiplier, err = p.integer(f, "unit_multiplier", 1, r.Unit.MaxMultiplier()); err != nil {
			return nil, err
		}
	}
	unlimited, err := p.boolean(fs["unlimited"], "unlimited")
	if err != nil {
		return nil, err
	}
	if unlimited {
		// As in envoy: an unlimited rule names no unit; a requests_per_unit
		// beside it means nothing and is ignored.
		if r.Unit != NoUnit {
			return nil, p.fail(fs["unit"].key.Line, ErrInvalid, "an unlimited rate_limit must not have a unit")
		}
		if ext, ok := fs["sluice"]; ok {
			return nil, p.fail(ext.key.Line, ErrInvalid, "an unlimited rate_limit takes no sluice block")
		}
		r.Algorithm = Unlimited
		return r, nil
	}

	rpu, ok := fs["requests_per_unit"]
	if !ok {
		return nil, p.fail(n.Line, ErrInvalid, "rate_limit needs requests_per_unit (or unlimited: true)")
	}
	if r.Limit, err = p.integer(rpu, "requests_per_unit", 0, maxRequestsPerUnit); err != nil {
		return nil, err
	}
	ext := extension{algorithm: Fixed}
	if f, ok := fs["sluice"]; ok && f.value.Tag != "!!null" {
		if err := p.extension(f.value, &ext); err != nil {
			return nil, err
		}
	}
	r.Algorithm = ext.algorithm
	if err := p.parameters(r, ext, fs, n.Line); err != nil {
		return nil, err
	}
	return r, nil
}

func (p *parser) replaces(f field, r *Rule) error {
	if f.value == nil || f.value.Tag == "!!null" {
		return nil
	}
	if f.value.Kind != yaml.SequenceNode {
		return p.fail(f.value.Line, ErrInvalid, "replaces must be a list of {name: …}")
	}
	for _, item := range f.value.Content {
		fs, err := p.fields(item, "a replaces entry", "name")
		if err != nil {
			return err
		}
		name, err := p.text(fs["name"], "name")
		if err != nil {
			return err
		}
		if name == "" {
			return p.fail(item.Line, ErrInvalid, "a replaces entry needs a name")
		}
		if name == r.Name {
			return p.fail(item.Line, ErrInvalid, "a rate_limit cannot replace itself (%q)", name)
		}
		r.Replaces = append(r.Replaces, name)
	}
	return nil
}

func parseUnit(s string) Unit {
	for u := Second; u <= Year; u++ {
		if strings.EqualFold(s, u.String()) {
			return u
		}
	}
	return NoUnit
}

// extension is the sluice block as read, before it is checked against the
// algorithm.
type extension struct {
	algorithm Algorithm
	line      int
	burst     *field
	period    *field
	lease     *field
	anchor    *field
	zone      *field
}

func (p *parser) extension(n *yaml.Node, ext *extension) error {
	fs, err := p.fields(n, "the sluice block", extensionFields...)
	if err != nil {
		return err
	}
	ext.line = n.Line
	if f, ok := fs["algorithm"]; ok {
		name, err := p.text(f, "algorithm")
		if err != nil {
			return err
		}
		ext.algorithm = 0
		for a := Fixed; a <= Concurrency; a++ {
			if name == a.String() {
				ext.algorithm = a
			}
		}
		if ext.algorithm == 0 {
			return p.fail(f.value.Line, ErrInvalid,
				"unknown algorithm %q (want fixed, gcra, sliding, sliding-exact, quota or concurrency)", name)
		}
	}
	for name, dst := range map[string]**field{"burst": &ext.burst, "period": &ext.period,
		"lease": &ext.lease, "anchor": &ext.anchor, "zone": &ext.zone} {
		if f, ok := fs[name]; ok {
			*dst = &f
		}
	}
	return nil
}

// parameters checks that the fields given suit the algorithm and fills in
// its parameters, validated as the algorithm package validates them.
func (p *parser) parameters(r *Rule, ext extension, fs map[string]field, line int) error {
	a := r.Algorithm
	notFor := func(f *field, name string) error {
		if f == nil {
			return nil
		}
		return p.fail(f.key.Line, ErrInvalid, "%s does not apply to algorithm %s", name, a)
	}
	if a != GCRA {
		if err := notFor(ext.burst, "burst"); err != nil {
			return err
		}
	}
	if a != Concurrency {
		if err := notFor(ext.lease, "lease"); err != nil {
			return err
		}
	}
	if a != Quota {
		if err := notFor(ext.anchor, "anchor"); err != nil {
			return err
		}
		if err := notFor(ext.zone, "zone"); err != nil {
			return err
		}
	}
	if r.Limit == 0 {
		if a != Fixed {
			return p.fail(fs["requests_per_unit"].value.Line, ErrInvalid,
				"requests_per_unit must be positive for algorithm %s", a)
		}
		// Envoy's way to block a descriptor outright.
		r.Algorithm = Deny
	}

	switch a {
	case Quota, Concurrency:
		if err := notFor(ext.period, "period"); err != nil {
			return err
		}
	default:
		if err := p.window(r, ext, fs, line); err != nil {
			return err
		}
	}

	switch a {
	case Fixed, Sliding:
		if r.Algorithm == Deny {
			return nil // a unit was required, as in envoy; nothing is counted
		}
		return p.valid(fs["requests_per_unit"].value.Line, r.WindowParams().Validate())
	case SlidingExact:
		if r.Limit > window.MaxLogLimit {
			return p.fail(fs["requests_per_unit"].value.Line, ErrInvalid,
				"requests_per_unit must be at most %d for sliding-exact", window.MaxLogLimit)
		}
		return p.valid(fs["requests_per_unit"].value.Line, r.WindowParams().Validate())
	case GCRA:
		r.Burst = r.Limit - 1
		if ext.burst != nil {
			b, err := p.integer(*ext.burst, "burst", 0, math.MaxInt64-1)
			if err != nil {
				return err
			}
			r.Burst = b
		}
		return p.valid(ext.line, r.GCRALimit().Validate())
	case Quota:
		if f, ok := fs["unit_multiplier"]; ok && r.Multiplier != 1 {
			return p.fail(f.key.Line, ErrInvalid, "algorithm quota renews per calendar %s: unit_multiplier must be 1", r.Unit)
		}
		return p.quota(r, ext, fs, line)
	case Concurrency:
		if f, ok := fs["unit"]; ok {
			return p.fail(f.key.Line, ErrInvalid, "unit does not apply to algorithm concurrency (leases end after lease)")
		}
		r.Lease = conc.DefaultParams().Lease
		if ext.lease != nil {
			d, err := p.duration(*ext.lease, "lease")
			if err != nil {
				return err
			}
			r.Lease = d
		}
		return p.valid(fs["requests_per_unit"].value.Line, r.ConcParams().Validate())
	}
	return nil
}

// window sets r.Window from unit or from the extension's period (exactly
// one of them).
func (p *parser) window(r *Rule, ext extension, fs map[string]field, line int) error {
	switch {
	case ext.period != nil && r.Unit != NoUnit:
		return p.fail(ext.period.key.Line, ErrInvalid, "give unit or period, not both")
	case ext.period != nil:
		d, err := p.duration(*ext.period, "period")
		if err != nil {
			return err
		}
		r.Window = d
	case r.Unit != NoUnit:
		r.Window = r.Unit.Nanoseconds() * r.Multiplier
	default:
		return p.fail(line, ErrInvalid, "rate_limit needs a unit")
	}
	return nil
}

func (p *parser) quota(r *Rule, ext extension, fs map[string]field, line int) error {
	var period quota.Period
	switch r.Unit {
	case Hour:
		period = quota.Hour
	case Day:
		period = quota.Day
	case Week:
		period = quota.Week
	case Month:
		period = quota.Month
	case Year:
		period = quota.Year
	case NoUnit:
		return p.fail(line, ErrInvalid, "algorithm quota needs a unit (hour, day, week, month or year)")
	default:
		return p.fail(fs["unit"].value.Line, ErrInvalid, "algorithm quota renews per hour, day, week, month or year, not per %s", r.Unit)
	}
	r.Period = period
	if ext.zone != nil {
		z, err := p.text(*ext.zone, "zone")
		if err != nil {
			return err
		}
		r.Zone = z
	}
	if r.Zone == "" {
		r.Zone = "UTC"
	}
	if ext.anchor != nil {
		at, err := p.instant(*ext.anchor, "anchor")
		if err != nil {
			return err
		}
		r.Anchor, r.HasAnchor = at, true
	}
	sch, err := quota.NewSchedule(period, r.Anchor, r.HasAnchor, r.Zone)
	if err != nil {
		l := ext.line
		if ext.zone != nil {
			l = ext.zone.value.Line
		}
		return p.valid(l, err)
	}
	r.schedule = sch
	return nil
}

func (p *parser) valid(line int, err error) error {
	if err == nil {
		return nil
	}
	return p.fail(line, ErrInvalid, "%v", err)
}

// duration reads a Go duration string ("90s", "1h30m") or whole seconds.
func (p *parser) duration(f field, what string) (int64, error) {
	v := f.value
	if v.Kind == yaml.ScalarNode && v.Tag == "!!int" {
		s, err := p.integer(f, what, 1, window.MaxWindow/1e9)
		if err != nil {
			return 0, err
		}
		return s * 1e9, nil
	}
	if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
		return 0, p.fail(v.Line, ErrInvalid, "%s must be a duration like 90s or whole seconds", what)
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil || d <= 0 {
		return 0, p.fail(v.Line, ErrInvalid, "%s must be a positive duration like 90s, not %q", what, v.Value)
	}
	return int64(d), nil
}

// instant reads an RFC 3339 time or whole Unix seconds.
func (p *parser) instant(f field, what string) (int64, error) {
	v := f.value
	if v.Kind == yaml.ScalarNode && v.Tag == "!!int" {
		s, err := p.integer(f, what, 0, quota.MaxInstant/1e9)
		if err != nil {
			return 0, err
		}
		return quota.AnchorFromSeconds(s)
	}
	if v.Kind == yaml.ScalarNode && (v.Tag == "!!str" || v.Tag == "!!timestamp") {
		t, err := time.Parse(time.RFC3339Nano, v.Value)
		if err == nil && t.Year() >= 1970 && t.Year() < 2255 {
			return t.UnixNano(), nil
		}
	}
	return 0, p.fail(v.Line, ErrInvalid, "%s must be an RFC 3339 time (2024-01-17T09:00:00Z) or Unix seconds, not %q", what, v.Value)
}
