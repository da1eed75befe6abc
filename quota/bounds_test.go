package quota

import (
	"errors"
	"testing"
	"time"
)

type boundsCase struct {
	name       string
	zone       string
	period     Period
	anchor     int64
	now        int64
	start, end int64
}

// checkBounds asserts the row and the boundary rules around it: start and
// end-1 ns lie in the period, end begins the next one.
func checkBounds(t *testing.T, tc boundsCase) {
	t.Helper()
	s := mustSchedule(t, tc.period, tc.anchor, tc.zone)
	for _, now := range []int64{tc.now, tc.start, tc.end - 1} {
		start, end, err := s.Bounds(now)
		if err != nil {
			t.Fatalf("%s: Bounds(%s): %v", tc.name, fmtNs(now), err)
		}
		if start != tc.start || end != tc.end {
			t.Errorf("%s: Bounds(%s) = [%s, %s), want [%s, %s)", tc.name, fmtNs(now),
				fmtNs(start), fmtNs(end), fmtNs(tc.start), fmtNs(tc.end))
		}
	}
	if start, _, err := s.Bounds(tc.end); err != nil || start != tc.end {
		t.Errorf("%s: Bounds(end=%s) starts at %s (err %v), want end", tc.name, fmtNs(tc.end), fmtNs(start), err)
	}
}

func TestBoundsCalendar(t *testing.T) {
	fri := utc(2024, 5, 17, 13, 45, 10, 5)
	for _, tc := range []boundsCase{
		{"hour", "UTC", Hour, none, fri, utc(2024, 5, 17, 13, 0, 0, 0), utc(2024, 5, 17, 14, 0, 0, 0)},
		{"day", "UTC", Day, none, fri, utc(2024, 5, 17, 0, 0, 0, 0), utc(2024, 5, 18, 0, 0, 0, 0)},
		{"week is ISO, Monday first", "UTC", Week, none, fri, utc(2024, 5, 13, 0, 0, 0, 0), utc(2024, 5, 20, 0, 0, 0, 0)},
		{"week across new year", "UTC", Week, none, utc(2025, 1, 1, 9, 0, 0, 0), utc(2024, 12, 30, 0, 0, 0, 0), utc(2025, 1, 6, 0, 0, 0, 0)},
		{"week on Sunday night", "UTC", Week, none, utc(2024, 5, 19, 23, 59, 59, 999_999_999), utc(2024, 5, 13, 0, 0, 0, 0), utc(2024, 5, 20, 0, 0, 0, 0)},
		{"month", "UTC", Month, none, fri, utc(2024, 5, 1, 0, 0, 0, 0), utc(2024, 6, 1, 0, 0, 0, 0)},
		{"leap February", "UTC", Month, none, utc(2024, 2, 29, 23, 0, 0, 0), utc(2024, 2, 1, 0, 0, 0, 0), utc(2024, 3, 1, 0, 0, 0, 0)},
		{"year", "UTC", Year, none, fri, utc(2024, 1, 1, 0, 0, 0, 0), utc(2025, 1, 1, 0, 0, 0, 0)},
		{"epoch", "UTC", Year, none, 0, utc(1970, 1, 1, 0, 0, 0, 0), utc(1971, 1, 1, 0, 0, 0, 0)},
		// +05:30: the top of the wall hour is half past in UTC.
		{"Kolkata hour", "Asia/Kolkata", Hour, none, utc(2024, 5, 17, 13, 45, 0, 0), utc(2024, 5, 17, 13, 30, 0, 0), utc(2024, 5, 17, 14, 30, 0, 0)},
		{"Kolkata day", "Asia/Kolkata", Day, none, utc(2024, 5, 17, 20, 0, 0, 0), utc(2024, 5, 17, 18, 30, 0, 0), utc(2024, 5, 18, 18, 30, 0, 0)},
		// +12:45 in the southern winter.
		{"Chatham day", "Pacific/Chatham", Day, none, utc(2024, 6, 1, 0, 0, 0, 0), utc(2024, 5, 31, 11, 15, 0, 0), utc(2024, 6, 1, 11, 15, 0, 0)},
		// 23:00 EST on Jan 31 is already February in UTC but not in New York.
		{"New York month end", "America/New_York", Month, none, utc(2024, 2, 1, 4, 0, 0, 0), utc(2024, 1, 1, 5, 0, 0, 0), utc(2024, 2, 1, 5, 0, 0, 0)},
		// Leap years after a zone's last explicit transition are where
		// Time.ZoneBounds ends a segment early (golang/go#81583).
		{"New York day, Dec 31 of leap 2040", "America/New_York", Day, none, utc(2040, 12, 31, 12, 0, 0, 0), utc(2040, 12, 31, 5, 0, 0, 0), utc(2041, 1, 1, 5, 0, 0, 0)},
		{"New York year 2041", "America/New_York", Year, none, utc(2041, 6, 1, 0, 0, 0, 0), utc(2041, 1, 1, 5, 0, 0, 0), utc(2042, 1, 1, 5, 0, 0, 0)},
		{"Berlin hour, Dec 31 of leap 2096", "Europe/Berlin", Hour, none, utc(2096, 12, 31, 23, 30, 0, 0), utc(2096, 12, 31, 23, 0, 0, 0), utc(2097, 1, 1, 0, 0, 0, 0)},
		{"Tokyo year", "Asia/Tokyo", Year, none, utc(2024, 12, 31, 15, 0, 0, 0), utc(2024, 12, 31, 15, 0, 0, 0), utc(2025, 12, 31, 15, 0, 0, 0)},
	} {
		checkBounds(t, tc)
	}
}

func TestBoundsAnchored(t *testing.T) {
	jan31 := utc(2023, 1, 31, 10, 0, 0, 0)
	feb29 := utc(2024, 2, 29, 12, 0, 0, 0)
	for _, tc := range []boundsCase{
		{"Jan 31 → Feb 28", "UTC", Month, jan31, utc(2023, 2, 15, 0, 0, 0, 0), utc(2023, 1, 31, 10, 0, 0, 0), utc(2023, 2, 28, 10, 0, 0, 0)},
		{"Feb 28 → Mar 31", "UTC", Month, jan31, utc(2023, 3, 1, 0, 0, 0, 0), utc(2023, 2, 28, 10, 0, 0, 0), utc(2023, 3, 31, 10, 0, 0, 0)},
		{"Mar 31 → Apr 30", "UTC", Month, jan31, utc(2023, 4, 10, 0, 0, 0, 0), utc(2023, 3, 31, 10, 0, 0, 0), utc(2023, 4, 30, 10, 0, 0, 0)},
		{"Apr 30 → May 31", "UTC", Month, jan31, utc(2023, 5, 5, 0, 0, 0, 0), utc(2023, 4, 30, 10, 0, 0, 0), utc(2023, 5, 31, 10, 0, 0, 0)},
		{"leap: Jan 31 → Feb 29", "UTC", Month, jan31, utc(2024, 2, 15, 0, 0, 0, 0), utc(2024, 1, 31, 10, 0, 0, 0), utc(2024, 2, 29, 10, 0, 0, 0)},
		{"leap: Feb 29 → Mar 31", "UTC", Month, jan31, utc(2024, 3, 1, 0, 0, 0, 0), utc(2024, 2, 29, 10, 0, 0, 0), utc(2024, 3, 31, 10, 0, 0, 0)},
		{"anchor after now gives phase only", "UTC", Month, utc(2031, 1, 31, 10, 0, 0, 0), utc(2023, 2, 15, 0, 0, 0, 0), utc(2023, 1, 31, 10, 0, 0, 0), utc(2023, 2, 28, 10, 0, 0, 0)},
		{"billing anniversary on the 17th", "UTC", Month, utc(2024, 3, 17, 9, 30, 0, 0), utc(2024, 5, 16, 0, 0, 0, 0), utc(2024, 4, 17, 9, 30, 0, 0), utc(2024, 5, 17, 9, 30, 0, 0)},
		{"Jan 30 → Feb 29 → Mar 30", "UTC", Month, utc(2024, 1, 30, 0, 0, 0, 0), utc(2024, 3, 1, 0, 0, 0, 0), utc(2024, 2, 29, 0, 0, 0, 0), utc(2024, 3, 30, 0, 0, 0, 0)},
		{"Feb 29 year, first", "UTC", Year, feb29, utc(2025, 1, 10, 0, 0, 0, 0), utc(2024, 2, 29, 12, 0, 0, 0), utc(2025, 2, 28, 12, 0, 0, 0)},
		{"Feb 29 year, common year", "UTC", Year, feb29, utc(2025, 3, 1, 0, 0, 0, 0), utc(2025, 2, 28, 12, 0, 0, 0), utc(2026, 2, 28, 12, 0, 0, 0)},
		{"Feb 29 year, into leap", "UTC", Year, feb29, utc(2027, 12, 31, 0, 0, 0, 0), utc(2027, 2, 28, 12, 0, 0, 0), utc(2028, 2, 29, 12, 0, 0, 0)},
		{"Feb 29 year, 2100 is common", "UTC", Year, feb29, utc(2100, 2, 28, 11, 59, 59, 0), utc(2099, 2, 28, 12, 0, 0, 0), utc(2100, 2, 28, 12, 0, 0, 0)},
		{"Feb 29 year, 2000 is leap", "UTC", Year, feb29, utc(2000, 3, 1, 0, 0, 0, 0), utc(2000, 2, 29, 12, 0, 0, 0), utc(2001, 2, 28, 12, 0, 0, 0)},
		{"Dec 31 year", "UTC", Year, utc(2020, 12, 31, 23, 0, 0, 0), utc(2021, 6, 1, 0, 0, 0, 0), utc(2020, 12, 31, 23, 0, 0, 0), utc(2021, 12, 31, 23, 0, 0, 0)},
		// 2024-01-03 is a Wednesday.
		{"week on Wednesdays", "UTC", Week, utc(2024, 1, 3, 15, 0, 0, 0), utc(2024, 5, 17, 0, 0, 0, 0), utc(2024, 5, 15, 15, 0, 0, 0), utc(2024, 5, 22, 15, 0, 0, 0)},
		{"week just before", "UTC", Week, utc(2024, 1, 3, 15, 0, 0, 0), utc(2024, 5, 15, 14, 59, 59, 999_999_999), utc(2024, 5, 8, 15, 0, 0, 0), utc(2024, 5, 15, 15, 0, 0, 0)},
		// Sunday 23:00 EST is Monday 04:00 UTC: the zone decides the weekday.
		{"week Sunday night in New York", "America/New_York", Week, utc(2024, 1, 8, 4, 0, 0, 0), utc(2024, 5, 15, 0, 0, 0, 0), utc(2024, 5, 13, 3, 0, 0, 0), utc(2024, 5, 20, 3, 0, 0, 0)},
		{"day at 06:00", "UTC", Day, utc(2024, 1, 1, 6, 0, 0, 0), utc(2024, 5, 17, 5, 0, 0, 0), utc(2024, 5, 16, 6, 0, 0, 0), utc(2024, 5, 17, 6, 0, 0, 0)},
		{"hour to the ns", "UTC", Hour, utc(2020, 1, 1, 7, 34, 56, 789), utc(2024, 5, 17, 13, 0, 0, 0), utc(2024, 5, 17, 12, 34, 56, 789), utc(2024, 5, 17, 13, 34, 56, 789)},
	} {
		checkBounds(t, tc)
	}
}

// New York 2024: spring forward Mar 10 07:00Z (02:00 EST → 03:00 EDT), fall
// back Nov 3 06:00Z (02:00 EDT → 01:00 EST). Berlin 2024: Mar 31 01:00Z
// (02:00 CET → 03:00 CEST), Oct 27 01:00Z (03:00 CEST → 02:00 CET).
func TestBoundsDST(t *testing.T) {
	const ny, berlin = "America/New_York", "Europe/Berlin"
	at0230EST := utc(2024, 1, 5, 7, 30, 0, 0)  // 02:30 wall time
	at0130EST := utc(2024, 1, 5, 6, 30, 0, 0)  // 01:30 wall time
	onThe10th := utc(2024, 1, 10, 7, 30, 0, 0) // day 10, 02:30
	sunday0130 := utc(2024, 10, 27, 5, 30, 0, 0)
	jan31Berlin := utc(2024, 1, 31, 1, 30, 0, 0) // Jan 31 02:30 CET
	sep27Berlin := utc(2024, 9, 27, 0, 30, 0, 0) // Sep 27 02:30 CEST
	for _, tc := range []boundsCase{
		{"NY day, spring forward is 23 h", ny, Day, none, utc(2024, 3, 10, 12, 0, 0, 0), utc(2024, 3, 10, 5, 0, 0, 0), utc(2024, 3, 11, 4, 0, 0, 0)},
		{"NY day, fall back is 25 h", ny, Day, none, utc(2024, 11, 3, 12, 0, 0, 0), utc(2024, 11, 3, 4, 0, 0, 0), utc(2024, 11, 4, 5, 0, 0, 0)},
		// 02:30 does not exist on Mar 10: that day starts when the clock jumps to 03:00.
		{"NY day 02:30 before the gap", ny, Day, at0230EST, utc(2024, 3, 10, 6, 0, 0, 0), utc(2024, 3, 9, 7, 30, 0, 0), utc(2024, 3, 10, 7, 0, 0, 0)},
		{"NY day 02:30 after the gap", ny, Day, at0230EST, utc(2024, 3, 10, 7, 0, 0, 0), utc(2024, 3, 10, 7, 0, 0, 0), utc(2024, 3, 11, 6, 30, 0, 0)},
		// 01:30 occurs twice on Nov 3: the first occurrence (EDT) starts the day.
		{"NY day 01:30 before the overlap", ny, Day, at0130EST, utc(2024, 11, 3, 5, 0, 0, 0), utc(2024, 11, 2, 5, 30, 0, 0), utc(2024, 11, 3, 5, 30, 0, 0)},
		{"NY day 01:30 in the repeated hour", ny, Day, at0130EST, utc(2024, 11, 3, 6, 15, 0, 0), utc(2024, 11, 3, 5, 30, 0, 0), utc(2024, 11, 4, 6, 30, 0, 0)},
		{"NY hour, repeated hour is 2 h", ny, Hour, none, utc(2024, 11, 3, 6, 30, 0, 0), utc(2024, 11, 3, 5, 0, 0, 0), utc(2024, 11, 3, 7, 0, 0, 0)},
		{"NY hour before spring gap", ny, Hour, none, utc(2024, 3, 10, 6, 59, 0, 0), utc(2024, 3, 10, 6, 0, 0, 0), utc(2024, 3, 10, 7, 0, 0, 0)},
		{"NY hour after spring gap", ny, Hour, none, utc(2024, 3, 10, 7, 0, 0, 0), utc(2024, 3, 10, 7, 0, 0, 0), utc(2024, 3, 10, 8, 0, 0, 0)},
		{"NY month March", ny, Month, none, utc(2024, 3, 15, 0, 0, 0, 0), utc(2024, 3, 1, 5, 0, 0, 0), utc(2024, 4, 1, 4, 0, 0, 0)},
		{"NY month November", ny, Month, none, utc(2024, 11, 15, 0, 0, 0, 0), utc(2024, 11, 1, 4, 0, 0, 0), utc(2024, 12, 1, 5, 0, 0, 0)},
		{"NY month 10th 02:30, into gap", ny, Month, onThe10th, utc(2024, 3, 1, 0, 0, 0, 0), utc(2024, 2, 10, 7, 30, 0, 0), utc(2024, 3, 10, 7, 0, 0, 0)},
		{"NY month 10th 02:30, out of gap", ny, Month, onThe10th, utc(2024, 3, 20, 0, 0, 0, 0), utc(2024, 3, 10, 7, 0, 0, 0), utc(2024, 4, 10, 6, 30, 0, 0)},
		{"NY week Sunday 01:30 overlap", ny, Week, sunday0130, utc(2024, 11, 3, 6, 10, 0, 0), utc(2024, 11, 3, 5, 30, 0, 0), utc(2024, 11, 10, 6, 30, 0, 0)},
		{"Berlin day, spring forward", berlin, Day, none, utc(2024, 3, 31, 12, 0, 0, 0), utc(2024, 3, 30, 23, 0, 0, 0), utc(2024, 3, 31, 22, 0, 0, 0)},
		{"Berlin day, fall back", berlin, Day, none, utc(2024, 10, 27, 12, 0, 0, 0), utc(2024, 10, 26, 22, 0, 0, 0), utc(2024, 10, 27, 23, 0, 0, 0)},
		{"Berlin month October", berlin, Month, none, utc(2024, 10, 15, 0, 0, 0, 0), utc(2024, 9, 30, 22, 0, 0, 0), utc(2024, 10, 31, 23, 0, 0, 0)},
		{"Berlin Jan 31 02:30 → Feb 29", berlin, Month, jan31Berlin, utc(2024, 2, 10, 0, 0, 0, 0), utc(2024, 1, 31, 1, 30, 0, 0), utc(2024, 2, 29, 1, 30, 0, 0)},
		{"Berlin Feb 29 → Mar 31 in the gap", berlin, Month, jan31Berlin, utc(2024, 3, 15, 0, 0, 0, 0), utc(2024, 2, 29, 1, 30, 0, 0), utc(2024, 3, 31, 1, 0, 0, 0)},
		{"Berlin Mar 31 gap → Apr 30 CEST", berlin, Month, jan31Berlin, utc(2024, 4, 2, 0, 0, 0, 0), utc(2024, 3, 31, 1, 0, 0, 0), utc(2024, 4, 30, 0, 30, 0, 0)},
		{"Berlin 27th 02:30 to overlap", berlin, Month, sep27Berlin, utc(2024, 10, 10, 0, 0, 0, 0), utc(2024, 9, 27, 0, 30, 0, 0), utc(2024, 10, 27, 0, 30, 0, 0)},
		{"Berlin 27th in repeated hour", berlin, Month, sep27Berlin, utc(2024, 10, 27, 1, 15, 0, 0), utc(2024, 10, 27, 0, 30, 0, 0), utc(2024, 11, 27, 1, 30, 0, 0)},
		{"Berlin hour, repeated hour", berlin, Hour, none, utc(2024, 10, 27, 1, 30, 0, 0), utc(2024, 10, 27, 0, 0, 0, 0), utc(2024, 10, 27, 2, 0, 0, 0)},
		// Samoa skipped Dec 30 2011 (-10 → +14 at 10:00Z): that day's period is empty.
		{"Apia before the skipped day", "Pacific/Apia", Day, none, utc(2011, 12, 30, 9, 59, 59, 0), utc(2011, 12, 29, 10, 0, 0, 0), utc(2011, 12, 30, 10, 0, 0, 0)},
		{"Apia after the skipped day", "Pacific/Apia", Day, none, utc(2011, 12, 30, 12, 0, 0, 0), utc(2011, 12, 30, 10, 0, 0, 0), utc(2011, 12, 31, 10, 0, 0, 0)},
		// Brazil moved clocks at midnight: 2018-11-04 00:00 did not exist in São Paulo.
		{"São Paulo midnight gap", "America/Sao_Paulo", Day, none, utc(2018, 11, 4, 12, 0, 0, 0), utc(2018, 11, 4, 3, 0, 0, 0), utc(2018, 11, 5, 2, 0, 0, 0)},
	} {
		checkBounds(t, tc)
	}
}

func TestScheduleErrors(t *testing.T) {
	if _, err := ParsePeriod("fortnight"); !errors.Is(err, ErrUnknownPeriod) {
		t.Errorf("ParsePeriod(fortnight) err = %v", err)
	}
	for in, want := range map[string]Period{"hour": Hour, "Day": Day, "WEEK": Week, "MoNtH": Month, "year": Year} {
		if got, err := ParsePeriod(in); got != want || err != nil {
			t.Errorf("ParsePeriod(%q) = %v, %v", in, got, err)
		}
	}
	for _, zone := range []string{"Mars/Olympus_Mons", "Local", "../etc/passwd"} {
		if _, err := NewSchedule(Day, 0, false, zone); !errors.Is(err, ErrUnknownZone) {
			t.Errorf("zone %q err = %v, want ErrUnknownZone", zone, err)
		}
	}
	if s, err := NewSchedule(Day, 0, false, ""); err != nil || s.Zone != "UTC" {
		t.Errorf("default zone = %q, %v", s.Zone, err)
	}
	if _, err := NewSchedule(Day, -1, true, "UTC"); !errors.Is(err, ErrNegative) {
		t.Errorf("negative anchor err = %v", err)
	}
	if _, err := NewSchedule(Day, MaxInstant+1, true, "UTC"); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("late anchor err = %v", err)
	}
	if _, err := NewSchedule(0, 0, false, "UTC"); !errors.Is(err, ErrUnknownPeriod) {
		t.Errorf("period 0 err = %v", err)
	}
	if _, _, err := (Schedule{Period: Day, Zone: "UTC"}).Bounds(0); !errors.Is(err, ErrNoZone) {
		t.Errorf("unbuilt schedule err = %v", err)
	}
	s := mustSchedule(t, Year, none, "UTC")
	for _, now := range []int64{-1, MaxInstant + 1} {
		if _, _, err := s.Bounds(now); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Bounds(%d) err = %v", now, err)
		}
	}
	if _, err := AnchorFromSeconds(-5); !errors.Is(err, ErrNegative) {
		t.Errorf("AnchorFromSeconds(-5) err = %v", err)
	}
	if _, err := AnchorFromSeconds(MaxInstant/1e9 + 1); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("AnchorFromSeconds(too big) err = %v", err)
	}
	if ns, err := AnchorFromSeconds(1_700_000_000); ns != 1_700_000_000*1e9 || err != nil {
		t.Errorf("AnchorFromSeconds = %d, %v", ns, err)
	}
}

// The latest supported instant still has representable bounds in every
// period and in a zone far east and far west.
func TestBoundsAtRangeEnds(t *testing.T) {
	for _, zone := range []string{"UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago"} {
		for p := Hour; p <= Year; p++ {
			for _, anchor := range []int64{none, utc(2024, 12, 31, 23, 59, 59, 999_999_999)} {
				s := mustSchedule(t, p, anchor, zone)
				for _, now := range []int64{0, MaxInstant} {
					start, end, err := s.Bounds(now)
					if err != nil || start > now || end <= now {
						t.Errorf("%s %v anchor %d: Bounds(%d) = %d, %d, %v", zone, p, anchor, now, start, end, err)
					}
				}
			}
		}
	}
}

// offsetUntil must always make progress and never claim a constant offset
// across a change, including on the leap-year days where Time.ZoneBounds
// reports an end before the instant asked about.
func TestOffsetUntil(t *testing.T) {
	for _, zone := range []string{"America/New_York", "Europe/Warsaw", "Australia/Sydney"} {
		loc, _ := LoadZone(zone)
		for _, from := range []int64{utc(2040, 12, 30, 0, 0, 0, 0), utc(2024, 3, 1, 0, 0, 0, 0), utc(2096, 12, 30, 12, 0, 0, 0)} {
			u := from / nsPerSecond
			for u < from/nsPerSecond+4*86400 {
				off, end, bounded := offsetUntil(loc, u)
				if !bounded || end <= u {
					t.Fatalf("%s: offsetUntil(%d) = %d, %d, %v", zone, u, off, end, bounded)
				}
				for x := u; x < end; x += 600 {
					if offsetAt(loc, x) != off {
						t.Fatalf("%s: offset changes at %d inside [%d, %d)", zone, x, u, end)
					}
				}
				u = end
			}
		}
	}
}

// Zones come from the compiled-in database only: pointing the host's
// lookup elsewhere changes nothing, and "Local" is refused.
func TestZonesIgnoreTheHost(t *testing.T) {
	t.Setenv("ZONEINFO", t.TempDir())
	t.Setenv("TZ", "America/New_York")
	loc, err := LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if _, off := time.Date(2026, 7, 1, 12, 0, 0, 0, loc).Zone(); off != 2*3600 {
		t.Fatalf("Berlin in July is UTC+%d s", off)
	}
	for _, bad := range []string{"Local", "Mars/Olympus", "../Europe/Berlin", "europe/berlin"} {
		if _, err := LoadZone(bad); !errors.Is(err, ErrUnknownZone) {
			t.Errorf("LoadZone(%q) = %v, want ErrUnknownZone", bad, err)
		}
	}
}
