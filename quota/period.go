package quota

import (
	"strconv"
	"strings"
)

// Period is the calendar unit a quota renews on.
type Period uint8

// The periods; the zero Period is invalid so a forgotten field is caught.
const (
	Hour Period = iota + 1
	Day
	Week
	Month
	Year
)

// ParsePeriod reads a period name case-insensitively.
func ParsePeriod(s string) (Period, error) {
	for p := Hour; p <= Year; p++ {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return 0, ErrUnknownPeriod
}

// Valid reports whether p is one of the five periods.
func (p Period) Valid() bool { return p >= Hour && p <= Year }

// String is the upper-case command spelling, or "Period(n)" for an invalid value.
func (p Period) String() string {
	switch p {
	case Hour:
		return "HOUR"
	case Day:
		return "DAY"
	case Week:
		return "WEEK"
	case Month:
		return "MONTH"
	case Year:
		return "YEAR"
	}
	return "Period(" + strconv.Itoa(int(p)) + ")"
}
