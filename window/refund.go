package window

// A charge held to be settled later (RL.RESERVE, RL.SETTLE) is given back
// by Refund and topped up by Force. The window states are sums of the
// units each (sub-)window admitted, so giving back units charged in a
// window is the replay without them, exactly, whoever else counted there
// since — as long as the window still counts. A window that has passed
// gives nothing back (its units no longer weigh on any decision, or weigh
// as the replay's would: the sliding counter's previous sub-window), and a
// state counted under another window length is left alone.

// Refund gives back up to n units charged in the sub-window starting at
// start under a window of w. It returns the new state and the units given
// back.
func (s CounterState) Refund(w, start, n int64) (CounterState, int64) {
	if n <= 0 || s.Window != w {
		return s, 0
	}
	var g int64
	switch s.Start {
	case start:
		g = min(n, s.Curr)
		s.Curr -= g
	case start + w:
		g = min(n, s.Prev)
		s.Prev -= g
	}
	return s, g
}

// Force counts cost units at now whatever the limit says (the work they
// stand for is done); later requests wait for them. It returns the state
// to store and when the key may expire.
func (s CounterState) Force(exists bool, now int64, p Params, cost int64) (CounterState, int64, error) {
	if err := checkCall(now, p, cost); err != nil {
		return s, 0, err
	}
	st, _ := s.rolled(exists, now, p.Window)
	st.Curr += min(cost, MaxTime-st.Curr)
	return st, st.Start + 2*st.Window, nil
}

// Refund gives back up to n units charged in the window starting at start
// under a window of w.
func (s FixedState) Refund(w, start, n int64) (FixedState, int64) {
	if n <= 0 || s.Window != w || s.Start != start {
		return s, 0
	}
	g := min(n, s.Count)
	s.Count -= g
	return s, g
}

// Force counts cost units at now whatever the limit says.
func (s FixedState) Force(exists bool, now int64, p Params, cost int64) (FixedState, int64, error) {
	if err := checkCall(now, p, cost); err != nil {
		return s, 0, err
	}
	st := s.rolled(exists, now, p.Window)
	st.Count += min(cost, MaxTime-st.Count)
	return st, st.Start + st.Window, nil
}

// Refund gives back up to n of the units admitted at the instant at (the
// charge's own entry; units admitted at the same nanosecond are alike).
// An entry that has left the log gives nothing. The state returned shares
// no memory with s.
func (s LogState) Refund(at, n int64) (LogState, int64) {
	if n <= 0 || s.tailUnits == 0 {
		return s, 0
	}
	if s.tail == at {
		g := min(n, s.tailUnits)
		c := s.Clone()
		c.tailUnits -= g
		if c.tailUnits == 0 && len(c.times) > 0 {
			// The entry before becomes the newest.
			last := len(c.times) - 1
			c.tail, c.tailUnits = c.times[last], int64(c.cum[last])-c.cumBefore(last)
			c.times, c.cum = c.times[:last], c.cum[:last]
		}
		return c, g
	}
	i := s.firstAfter(at - 1)
	if i >= len(s.times) || s.times[i] != at {
		return s, 0
	}
	c := s.Clone()
	j := i - s.head
	units := int64(c.cum[j]) - c.cumBefore(j)
	g := min(n, units)
	for k := j; k < len(c.cum); k++ {
		c.cum[k] -= uint32(g)
	}
	if g == units {
		c.times = append(c.times[:j], c.times[j+1:]...)
		c.cum = append(c.cum[:j], c.cum[j+1:]...)
	}
	return c, g
}

// Force admits cost units at now whatever the limit says. More than the
// limit at one instant decide nothing more than the limit does (every
// request is refused until they leave, together), so at most p.Limit are
// logged.
func (s LogState) Force(exists bool, now int64, p Params, cost int64) (LogState, int64, error) {
	if err := checkCall(now, p, cost); err != nil {
		return s, 0, err
	}
	if !exists {
		s = LogState{}
	}
	cost = min(cost, p.Limit)
	if cost == 0 {
		return s, 0, nil
	}
	eff := now
	if s.tailUnits > 0 && s.tail > eff {
		eff = s.tail
	}
	horizon := eff - p.Window
	st := s.admit(s.firstAfter(horizon), horizon, eff, cost)
	return st, eff + p.Window, nil
}

// Latest is the start of the window the state counted its latest units
// in (a refund of the latest charge takes them from there).
func (s CounterState) Latest() int64 { return s.Start }

// Latest is the start of the window the state counts.
func (s FixedState) Latest() int64 { return s.Start }
