package quota

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// TZDataVersion is the IANA tz database release compiled into the binary.
const TZDataVersion = "2025c"

// tzdata is the IANA tz database (release TZDataVersion, as Go ships it in
// lib/time/zoneinfo.zip: uncompressed TZif files named by zone). Zones are
// read from it alone, never from the host's /usr/share/zoneinfo or
// $ZONEINFO: two replicas on hosts with different tz packages must agree
// on every period boundary, and so must two builds with different Go
// versions. Updating it is a deliberate change (see tzdata/README).
//
//go:embed tzdata/zoneinfo.zip
var tzdata []byte

// tzfiles maps each zone name to its TZif data. It is built once from the
// embedded database and only read afterwards.
var tzfiles = func() map[string][]byte {
	m := map[string][]byte{}
	zr, err := zip.NewReader(bytes.NewReader(tzdata), int64(len(tzdata)))
	if err != nil {
		return m // every zone but UTC then fails to load, naming the zone
	}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(rc, 1<<20))
		rc.Close()
		if err == nil {
			m[f.Name] = data
		}
	}
	return m
}()

// zoneNames numbers the zones of the compiled-in database for quota
// records (State.AppendRecord): "UTC" is 0, the others follow in name
// order. Built once, only read afterwards; the numbers never leave the
// process (snapshots and the journal carry names).
var zoneNames, zoneIndex = func() ([]string, map[string]uint64) {
	names := []string{"UTC"}
	for name := range tzfiles {
		if name != "UTC" {
			names = append(names, name)
		}
	}
	slices.Sort(names[1:])
	index := make(map[string]uint64, len(names))
	for i, name := range names {
		index[name] = uint64(i)
	}
	return names, index
}()

// LoadZone loads an IANA zone by name from the compiled-in tz database (""
// and "UTC" are UTC). "Local" is refused: it means whatever the host is set
// to, which replicas may not share.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || strings.EqualFold(name, "UTC") {
		return time.UTC, nil
	}
	if data, ok := tzfiles[name]; ok {
		if loc, err := time.LoadLocationFromTZData(name, data); err == nil {
			return loc, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownZone, name)
}

const (
	// searchSlack bounds how far an instant's wall-clock reading can be from
	// the instant itself: UTC offsets in the tz database stay within ±16 h
	// (LMT included), so 27 h is safely wide.
	searchSlack = 27 * secPerHour
	// maxZoneHops bounds the steps taken across ±searchSlack of a wall time.
	// Each step ends at an offset change, at a UTC new year (where Go splits
	// rule-based segments) or an hour on (see offsetUntil); two days hold
	// only a few of each.
	maxZoneHops = 64
)

// firstInstant is the earliest instant (Unix ns) at which loc's wall clock
// reads wall or later. It walks the periods of constant UTC offset forward
// from a point before which no reading can reach wall; in a period [u, e)
// with offset off the earliest candidate is max(u, wall-off), and the first
// period where that candidate is before e holds the answer. This is the rule
// documented in the package comment: the wall time itself, its first
// occurrence when repeated, the transition when skipped.
func firstInstant(loc *time.Location, wall int64) (int64, error) {
	ws := floorDiv(wall, nsPerSecond)
	wns := wall - ws*nsPerSecond
	u := ws - searchSlack
	for range maxZoneHops {
		off, end, bounded := offsetUntil(loc, u)
		cs, cns := ws-int64(off), wns
		if cs < u {
			cs, cns = u, 0
		}
		if !bounded || cs < end {
			return secondsToNs(cs, cns)
		}
		u = end
	}
	return 0, fmt.Errorf("%w: zone %s changes offset too often near wall time %d", ErrOutOfRange, loc, wall)
}

// offsetUntil is the UTC offset at Unix second u and a later second before
// which it does not change (not necessarily the next change: an earlier
// bound only costs another step); bounded is false when it never changes.
//
// Time.ZoneBounds gives the bound, except that for years served by a zone's
// POSIX TZ rule it can end a leap year's last segment a day early, before u
// itself (golang/go#81583). Then the bound is found by probing an hour ahead
// and bisecting for the change; no zone changes offset twice within an hour.
func offsetUntil(loc *time.Location, u int64) (off int, end int64, bounded bool) {
	t := time.Unix(u, 0).In(loc)
	_, off = t.Zone()
	_, e := t.ZoneBounds()
	if e.IsZero() {
		return off, 0, false
	}
	if end = e.Unix(); end > u {
		return off, end, true
	}
	lo, hi := u, u+secPerHour // off holds at lo; find the first second after it that differs
	if offsetAt(loc, hi) == off {
		return off, hi, true
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if offsetAt(loc, mid) == off {
			lo = mid
		} else {
			hi = mid
		}
	}
	return off, hi, true
}

func offsetAt(loc *time.Location, u int64) int {
	_, off := time.Unix(u, 0).In(loc).Zone()
	return off
}

// secondsToNs is sec*1e9+ns, refusing results that do not fit in int64.
func secondsToNs(sec, ns int64) (int64, error) {
	if sec > (math.MaxInt64-ns)/nsPerSecond || sec < math.MinInt64/nsPerSecond+1 {
		return 0, ErrOutOfRange
	}
	return sec*nsPerSecond + ns, nil
}

// wallOf is the wall value (see civil.go) of instant ns in loc, and the time
// for reading calendar fields.
func wallOf(loc *time.Location, ns int64) (int64, time.Time) {
	t := time.Unix(0, ns).In(loc)
	_, off := t.Zone()
	return ns + int64(off)*nsPerSecond, t
}
