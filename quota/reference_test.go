package quota

import (
	"math/rand/v2"
	"testing"
	"time"
)

// A deliberately naive reference for Schedule.Bounds, sharing no code with
// it: period starts are stepped as civil times with time.Time.Add/AddDate and
// explicit day clamping, and a wall time becomes an instant by trying the
// offsets in force 30 h either side (valid if the wall clock then reads
// exactly that time; earliest wins) or, if none is valid (a skipped time),
// by bisecting for the first instant whose reading is at or after it. It
// assumes at most one offset change within 30 h of any time, which holds for
// the zones tested here.

func refWall(loc *time.Location, ns int64) time.Time {
	t := time.Unix(0, ns).In(loc)
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

func refReading(loc *time.Location, ns int64) int64 { return refWall(loc, ns).UnixNano() }

func refOffset(loc *time.Location, ns int64) int64 {
	_, off := time.Unix(0, ns).In(loc).Zone()
	return int64(off) * int64(time.Second)
}

func refFirst(loc *time.Location, w time.Time) int64 {
	wall := w.UnixNano()
	lo, hi := wall-int64(30*time.Hour), wall+int64(30*time.Hour)
	best, found := int64(0), false
	for _, off := range []int64{refOffset(loc, lo), refOffset(loc, hi)} {
		if u := wall - off; refReading(loc, u) == wall && (!found || u < best) {
			best, found = u, true
		}
	}
	if found {
		return best
	}
	for lo+1 < hi { // invariant: reading(lo) < wall <= reading(hi)
		mid := lo + (hi-lo)/2
		if refReading(loc, mid) >= wall {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// refStart is the civil start of period k counted from the anchor's wall
// reading (or a calendar-aligned stand-in when there is no anchor).
func refStart(p Period, a time.Time, k int) time.Time {
	switch p {
	case Hour:
		return a.Add(time.Duration(k) * time.Hour)
	case Day:
		return a.AddDate(0, 0, k)
	case Week:
		return a.AddDate(0, 0, 7*k)
	}
	var first time.Time
	if p == Month {
		first = time.Date(a.Year(), a.Month()+time.Month(k), 1, a.Hour(), a.Minute(), a.Second(), a.Nanosecond(), time.UTC)
	} else {
		first = time.Date(a.Year()+k, a.Month(), 1, a.Hour(), a.Minute(), a.Second(), a.Nanosecond(), time.UTC)
	}
	last := first.AddDate(0, 1, -1).Day()
	return first.AddDate(0, 0, min(a.Day(), last)-1)
}

func refBounds(loc *time.Location, p Period, anchor int64, now int64) (int64, int64) {
	var a time.Time
	switch {
	case anchor != none:
		a = refWall(loc, anchor)
	case p == Week:
		a = time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC) // a Monday
	default:
		a = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	nominal := map[Period]time.Duration{Hour: time.Hour, Day: 24 * time.Hour, Week: 7 * 24 * time.Hour,
		Month: 30 * 24 * time.Hour, Year: 365 * 24 * time.Hour}[p]
	nowWall := refWall(loc, now)
	k := int(nowWall.Sub(a) / nominal)
	if nowWall.Sub(a) < 0 {
		k = int((nowWall.UnixNano() - a.UnixNano()) / int64(nominal))
	}
	// Step one period at a time until k is the last civil start at or
	// before now's reading, then look two periods either side for the last
	// start whose instant is not after now.
	for refStart(p, a, k).After(nowWall) {
		k--
	}
	for !refStart(p, a, k+1).After(nowWall) {
		k++
	}
	j := k - 2
	for refFirst(loc, refStart(p, a, j+1)) <= now {
		j++
	}
	return refFirst(loc, refStart(p, a, j)), refFirst(loc, refStart(p, a, j+1))
}

var referenceZones = []string{
	"UTC", "America/New_York", "Europe/Berlin", "Europe/London", "Australia/Sydney",
	"Australia/Lord_Howe", "Asia/Kolkata", "America/St_Johns", "Pacific/Chatham",
	"Pacific/Apia", "America/Sao_Paulo", "America/Havana", "Asia/Tehran", "Africa/Casablanca",
}

// randomNear picks an instant in [1971, 2150), half the time within 36 h of
// one of the zone's offset changes.
func randomNear(r *rand.Rand, loc *time.Location) int64 {
	lo, hi := utc(1971, 1, 1, 0, 0, 0, 0), utc(2150, 1, 1, 0, 0, 0, 0)
	ns := lo + r.Int64N(hi-lo)
	if r.IntN(2) == 0 {
		if _, end := time.Unix(0, ns).In(loc).ZoneBounds(); !end.IsZero() && end.UnixNano() < hi {
			ns = end.UnixNano() + r.Int64N(int64(72*time.Hour)) - int64(36*time.Hour)
		}
	}
	if r.IntN(4) == 0 { // land exactly on a whole hour, where starts live
		ns -= ns % int64(time.Hour)
	}
	return ns
}

// randomAnchor picks no anchor, a random instant, or an instant whose wall
// reading is in the small hours of a late day of the month (where clamping,
// gaps and overlaps happen).
func randomAnchor(r *rand.Rand, loc *time.Location, now int64) int64 {
	switch r.IntN(4) {
	case 0:
		return none
	case 1:
		return max(randomNear(r, loc), 0)
	}
	y := 1975 + r.IntN(150)
	t := time.Unix(0, now).In(loc)
	day := []int{t.Day(), 28, 29, 30, 31}[r.IntN(5)]
	month := []time.Month{t.Month(), time.January, time.February}[r.IntN(3)]
	// Build from civil fields; time.Date normalises (e.g. Feb 31 → Mar 3)
	// which is fine: any instant is a valid anchor.
	a := time.Date(y, month, day, r.IntN(4), 30*r.IntN(2), 0, 0, loc).UnixNano()
	return max(a, 0)
}

func TestBoundsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(2024, 229))
	cases := 400
	if testing.Short() {
		cases = 60
	}
	for _, zone := range referenceZones {
		loc, err := LoadZone(zone)
		if err != nil {
			t.Fatal(err)
		}
		for range cases {
			now := randomNear(r, loc)
			for p := Hour; p <= Year; p++ {
				anchor := randomAnchor(r, loc, now)
				s := mustSchedule(t, p, anchor, zone)
				start, end, err := s.Bounds(now)
				wantStart, wantEnd := refBounds(loc, p, anchor, now)
				if err != nil || start != wantStart || end != wantEnd {
					t.Fatalf("%s %v anchor %s now %s: got [%s, %s) %v, reference [%s, %s)", zone, p,
						fmtNs(anchor), fmtNs(now), fmtNs(start), fmtNs(end), err, fmtNs(wantStart), fmtNs(wantEnd))
				}
			}
		}
	}
}

// Walking a schedule period by period must tile time: each end is the next
// start, and every period is non-empty.
func TestBoundsTile(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 31))
	for _, zone := range referenceZones {
		loc, _ := LoadZone(zone)
		for p := Hour; p <= Year; p++ {
			now := randomNear(r, loc)
			s := mustSchedule(t, p, randomAnchor(r, loc, now), zone)
			start, end, err := s.Bounds(now)
			for i := 0; i < 50 && err == nil; i++ {
				var nextStart, nextEnd int64
				nextStart, nextEnd, err = s.Bounds(end)
				if nextStart != end || nextEnd <= nextStart || end <= start {
					t.Fatalf("%s %v: [%s, %s) followed by [%s, %s)", zone, p, fmtNs(start), fmtNs(end), fmtNs(nextStart), fmtNs(nextEnd))
				}
				start, end = nextStart, nextEnd
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
