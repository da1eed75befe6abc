package quota

import (
	"testing"
	"time"
)

// none marks a table row without ANCHOR.
const none = int64(-1)

// utc is a UTC instant in Unix ns, the form all table expectations use: the
// UTC equivalents below were worked out by hand from each zone's offsets.
func utc(y int, mo time.Month, d, h, mi, s, ns int) int64 {
	return time.Date(y, mo, d, h, mi, s, ns, time.UTC).UnixNano()
}

func mustSchedule(tb testing.TB, p Period, anchor int64, zone string) Schedule {
	tb.Helper()
	s, err := NewSchedule(p, max(anchor, 0), anchor != none, zone)
	if err != nil {
		tb.Fatalf("NewSchedule(%v, %d, %q): %v", p, anchor, zone, err)
	}
	return s
}

func fmtNs(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }
