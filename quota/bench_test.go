package quota

import (
	"testing"
	"time"
)

// The hot path: the key exists, its schedule matches and the period has not
// ended, so no calendar math is done.
func BenchmarkCheck(b *testing.B) {
	for _, zone := range []string{"UTC", "America/New_York"} {
		b.Run(zone, func(b *testing.B) {
			sch := mustSchedule(b, Month, utc(2024, 1, 31, 10, 0, 0, 0), zone)
			now := utc(2024, 5, 17, 10, 0, 0, 0)
			st, _, _, _ := Check(State{}, false, now, 1<<40, sch, 1)
			b.ReportAllocs()
			for b.Loop() {
				now++
				st, _, _, _ = Check(st, true, now, 1<<40, sch, 1)
			}
		})
	}
}

// Every call starts a new period, so Bounds runs each time. The clock cycles
// through 2024–2027 so the zone's explicit transitions (not the far-future
// TZ rule) are what is measured.
func BenchmarkCheckRollover(b *testing.B) {
	t0, wrap := utc(2024, 1, 1, 0, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0, 0)
	for _, zone := range []string{"UTC", "America/New_York"} {
		for _, p := range []Period{Hour, Day, Month, Year} {
			b.Run(zone+"/"+p.String(), func(b *testing.B) {
				sch := mustSchedule(b, p, utc(2024, 1, 31, 10, 0, 0, 0), zone)
				var st State
				exists, now := false, t0
				b.ReportAllocs()
				for b.Loop() {
					next, store, _, err := Check(st, exists, now, 100, sch, 1)
					if err != nil || !store {
						b.Fatal(err)
					}
					st, exists, now = next, true, next.End
					if now >= wrap {
						st, exists, now = State{}, false, t0
					}
				}
			})
		}
	}
}

// What the command layer pays to build a schedule per request without a
// zone cache (UTC needs no I/O).
func BenchmarkNewSchedule(b *testing.B) {
	for _, zone := range []string{"UTC", "America/New_York"} {
		b.Run(zone, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := NewSchedule(Month, 1_700_000_000e9, true, zone); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("cached America/New_York", func(b *testing.B) {
		loc, _ := LoadZone("America/New_York")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := NewScheduleIn(Month, 1_700_000_000e9, true, loc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkEncoding(b *testing.B) {
	loc, _ := LoadZone("America/New_York")
	sch, _ := NewScheduleIn(Month, 1_700_000_000e9, true, loc)
	st, _, _, _ := Check(State{}, false, utc(2024, 5, 17, 10, 0, 0, 0), 1_000_000, sch, 1)
	buf := st.AppendBinary(nil)
	b.Run("AppendBinary", func(b *testing.B) {
		b.ReportAllocs()
		dst := make([]byte, 0, 64)
		for b.Loop() {
			dst = st.AppendBinary(dst[:0])
		}
	})
	b.Run("DecodeState cached zone", func(b *testing.B) {
		load := func(string) (*time.Location, error) { return loc, nil }
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeStateWith(buf, load); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Logf("encoded size %d bytes", len(buf))
}
