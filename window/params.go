package window

const (
	// MaxWindow is the longest window, in nanoseconds (10⁹ seconds, about
	// 31.7 years). With now ≤ MaxTime it keeps every instant the algorithms
	// compute (now + 2·window at most) below 2⁶³.
	MaxWindow = int64(1_000_000_000) * nsPerSecond
	// MaxTime is the latest accepted now, in unix nanoseconds (2⁶², in
	// the year 2116). Earlier than 0 (1970) is rejected too: no real clock
	// reads it, and excluding it keeps every duration we subtract in range.
	MaxTime = int64(1) << 62
	// MaxLogLimit is the largest limit an exact (log) check accepts. A log
	// key holds at most this many distinct timestamps, 12 bytes each plus
	// at most as much again in slack: under 2.5 MB for the largest key.
	MaxLogLimit = int64(100_000)

	nsPerSecond = int64(1_000_000_000)
)

// Params are the arguments every check shares. Neither is stored with the
// state except the window of the counter and fixed states (see doc.go for
// what a changed window does).
type Params struct {
	// Limit is the most units admitted per window (> 0).
	Limit int64
	// Window is the window length in nanoseconds, in (0, MaxWindow].
	Window int64
}

// NewParams builds Params from a limit and a window in whole seconds, as the
// commands take them, refusing a window whose nanoseconds would overflow.
func NewParams(limit, windowSeconds int64) (Params, error) {
	if windowSeconds > MaxWindow/nsPerSecond {
		return Params{}, ErrWindowTooLong
	}
	p := Params{Limit: limit, Window: windowSeconds * nsPerSecond}
	return p, p.Validate()
}

// Validate reports the first thing wrong with p, as one of the sentinels.
func (p Params) Validate() error {
	switch {
	case p.Limit <= 0:
		return ErrLimit
	case p.Window <= 0:
		return ErrWindow
	case p.Window > MaxWindow:
		return ErrWindowTooLong
	}
	return nil
}

// checkCall validates everything a check takes besides the state.
func checkCall(now int64, p Params, cost int64) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if cost < 0 {
		return ErrCost
	}
	if now < 0 || now > MaxTime {
		return ErrTime
	}
	return nil
}

// windowStart is the start of the fixed sub-window holding t: the largest
// multiple of w (counted from the Unix epoch) not after t. t ≥ 0.
func windowStart(t, w int64) int64 {
	return t - t%w
}

// remainingUnits is limit − used, floored at zero.
func remainingUnits(limit, used int64) int64 {
	if used >= limit {
		return 0
	}
	return limit - used
}

// untilInstant is the duration from now to an instant after it; both lie in
// the ranges above, so the difference fits.
func untilInstant(at, now int64) int64 {
	if at <= now {
		return 0
	}
	return at - now
}
