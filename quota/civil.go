package quota

// Civil (proleptic Gregorian, zone-free) date arithmetic on "wall" values:
// nanoseconds since 1970-01-01 00:00 as read on a wall clock, which is how
// period starts are stepped before the zone turns them into instants.

const (
	nsPerSecond = int64(1_000_000_000)
	secPerHour  = int64(3600)
	nsPerHour   = secPerHour * nsPerSecond
	nsPerDay    = 24 * nsPerHour
	nsPerWeek   = 7 * nsPerDay
	// epochMonday is 1970-01-05, the first Monday after the Unix epoch (a
	// Thursday), as a wall value: the phase of ISO weeks.
	epochMonday = 4 * nsPerDay
)

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

// daysIn is the length of month m (1–12) of year y.
func daysIn(y int64, m int) int {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil counts days from 1970-01-01 to y-m-d (Howard Hinnant's
// algorithm: years start in March so the leap day is last).
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// clampedWall is the wall value of day d (clamped to the month's length) of
// month m in year y, at tod nanoseconds after midnight.
func clampedWall(y int64, m, d int, tod int64) int64 {
	if n := daysIn(y, m); d > n {
		d = n
	}
	return daysFromCivil(y, m, d)*nsPerDay + tod
}
