package quota

import (
	"fmt"
	"time"
)

// MaxInstant is the latest now or anchor accepted (9e18 ns, 2255-03-14 UTC):
// far enough from the int64 limit (2262-04-11) that the end of any period
// containing it, and its expiry, still fit.
const MaxInstant = int64(9_000_000_000_000_000_000)

// AnchorFromSeconds converts the command's ANCHOR <unix-seconds> to the
// nanoseconds a Schedule holds, refusing values that would overflow.
func AnchorFromSeconds(sec int64) (int64, error) {
	if sec < 0 {
		return 0, fmt.Errorf("anchor: %w", ErrNegative)
	}
	if sec > MaxInstant/nsPerSecond {
		return 0, fmt.Errorf("anchor: %w", ErrOutOfRange)
	}
	return sec * nsPerSecond, nil
}

// Schedule says when periods start: a Period, a zone, and optionally the
// anchor instant whose wall-clock reading in the zone sets the phase. Build it
// with NewSchedule or NewScheduleIn; the zero value is not usable.
type Schedule struct {
	// Period is the calendar unit.
	Period Period
	// Anchor is the subscription instant in Unix ns; 0 unless HasAnchor.
	Anchor int64
	// HasAnchor selects anchored periods; without it periods start at
	// calendar boundaries.
	HasAnchor bool
	// Zone is the IANA name the periods are reckoned in ("UTC" by default).
	Zone string

	loc   *time.Location
	phase phase
}

// phase is the anchor's wall-clock reading reduced to what the period needs.
type phase struct {
	// fixed is the offset of period starts within the period length, as a
	// wall value in [0, length), for the fixed-length periods HOUR, DAY, WEEK.
	fixed int64
	// month (YEAR only), day (MONTH and YEAR) and tod (time of day in ns)
	// place starts in the variable-length periods.
	month, day int
	tod        int64
}

// NewSchedule loads zone (see LoadZone) and builds a schedule. anchor is in
// Unix ns and ignored unless hasAnchor.
func NewSchedule(p Period, anchor int64, hasAnchor bool, zone string) (Schedule, error) {
	if !p.Valid() {
		return Schedule{}, ErrUnknownPeriod
	}
	loc, err := LoadZone(zone)
	if err != nil {
		return Schedule{}, err
	}
	return NewScheduleIn(p, anchor, hasAnchor, loc)
}

// NewScheduleIn builds a schedule in an already loaded zone, for callers that
// cache zones. loc must come from LoadZone or time.LoadLocation: its name is
// what a snapshot stores and reloads.
func NewScheduleIn(p Period, anchor int64, hasAnchor bool, loc *time.Location) (Schedule, error) {
	if !p.Valid() {
		return Schedule{}, ErrUnknownPeriod
	}
	if loc == nil || loc == time.Local || loc.String() == "Local" {
		return Schedule{}, ErrUnknownZone
	}
	s := Schedule{Period: p, HasAnchor: hasAnchor, Zone: loc.String(), loc: loc}
	if !hasAnchor {
		s.phase = phase{month: 1, day: 1}
		if p == Week {
			s.phase.fixed = epochMonday
		}
		return s, nil
	}
	if anchor < 0 {
		return Schedule{}, fmt.Errorf("anchor: %w", ErrNegative)
	}
	if anchor > MaxInstant {
		return Schedule{}, fmt.Errorf("anchor: %w", ErrOutOfRange)
	}
	s.Anchor = anchor
	wall, t := wallOf(loc, anchor)
	_, month, day := t.Date()
	s.phase = phase{month: int(month), day: day, tod: floorMod(wall, nsPerDay)}
	switch p {
	case Hour:
		s.phase.fixed = floorMod(wall, nsPerHour)
	case Day:
		s.phase.fixed = s.phase.tod
	case Week:
		s.phase.fixed = floorMod(wall, nsPerWeek)
	}
	return s, nil
}

// Validate reports whether s was built by NewSchedule or NewScheduleIn.
func (s Schedule) Validate() error {
	if !s.Period.Valid() {
		return ErrUnknownPeriod
	}
	if s.loc == nil || s.loc.String() != s.Zone {
		return ErrNoZone
	}
	if s.HasAnchor && (s.Anchor < 0 || s.Anchor > MaxInstant) {
		return ErrOutOfRange
	}
	return nil
}

// Equal reports whether two schedules define the same periods by their
// parameters (two different anchors with the same phase are not Equal, but
// they yield the same bounds).
func (s Schedule) Equal(o Schedule) bool {
	return s.Period == o.Period && s.HasAnchor == o.HasAnchor && s.Anchor == o.Anchor && s.Zone == o.Zone
}

// Bounds is the period containing now: start <= now < end, Unix ns.
func (s Schedule) Bounds(now int64) (start, end int64, err error) {
	if err := s.Validate(); err != nil {
		return 0, 0, err
	}
	if now < 0 || now > MaxInstant {
		return 0, 0, ErrOutOfRange
	}
	wallNow, t := wallOf(s.loc, now)
	// k indexes period starts: the latest W_k at or before now's wall
	// reading. firstInstant(W_k) <= now then holds (now itself reads
	// W_k or later), but after a fall-back a later W may already have
	// been reached, so step forward while the next start is not after now.
	var k int64
	switch s.Period {
	case Hour, Day, Week:
		k = floorDiv(wallNow-s.phase.fixed, s.step())
	case Month:
		y, m, _ := t.Date()
		k = int64(y)*12 + int64(m) - 1
		if s.startWall(k) > wallNow {
			k--
		}
	case Year:
		y, _, _ := t.Date()
		k = int64(y)
		if s.startWall(k) > wallNow {
			k--
		}
	}
	if start, err = firstInstant(s.loc, s.startWall(k)); err != nil {
		return 0, 0, err
	}
	for range maxZoneHops * 2 {
		if end, err = firstInstant(s.loc, s.startWall(k+1)); err != nil {
			return 0, 0, err
		}
		if end > now {
			return start, end, nil
		}
		start, k = end, k+1
	}
	return 0, 0, fmt.Errorf("%w: no period end found after %d in %s", ErrOutOfRange, now, s.Zone)
}

// step is the wall length of a fixed-length period.
func (s Schedule) step() int64 {
	switch s.Period {
	case Hour:
		return nsPerHour
	case Day:
		return nsPerDay
	}
	return nsPerWeek
}

// startWall is W_k, the wall-clock start of period k: k counts periods from
// the phase for HOUR, DAY and WEEK, months since year 0 for MONTH, and is the
// year for YEAR.
func (s Schedule) startWall(k int64) int64 {
	switch s.Period {
	case Month:
		y := floorDiv(k, 12)
		return clampedWall(y, int(k-y*12)+1, s.phase.day, s.phase.tod)
	case Year:
		return clampedWall(k, s.phase.month, s.phase.day, s.phase.tod)
	}
	return s.phase.fixed + k*s.step()
}
