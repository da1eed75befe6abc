package limiters

import (
	"github.com/sluice-rl/sluice/gcra"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/window"
)

// Giving units back to a counter and charging it past its limit: what a
// reservation's settle does to each counter it held (package machine's
// settle.go), and a refund of the latest charge (Envoy's negative hits).

// Charge is units charged to one counter: where they went, so that they
// can be given back or added to.
type Charge struct {
	// Key is the counter's key, Kind its algorithm.
	Key  []byte
	Kind keyspace.Kind
	// Units is what was charged.
	Units int64
	// Anchor is where the charge went: GCRA, the TAT it started from
	// (gcra.Refund's base); the window kinds, the (sub-)window's start, or
	// for a sliding log the entry's instant; quota, the period's start.
	// -1: the latest charge.
	Anchor int64
	// Step is GCRA's emission interval, or the window's length; Limit the
	// window's limit (a charge beyond the reserve is counted under them).
	Step, Limit int64
}

// Chargeable reports why l's counter cannot take a charge now (nil: it
// can): its key holds another kind.
func Chargeable(x Exec, l *Charge) error {
	s, now := x.LockKey(l.Key)
	defer x.Unlock(s)
	_, _, err := s.GetKind(l.Key, l.Kind, now)
	return err
}

// Refund gives n units of l back at now and returns how many went back.
// An Anchor of -1 says the units were the latest charged (a refund with no
// reservation, Envoy's is_negative_hits): GCRA's from its TAT, the window
// kinds' from the (sub-)window or log entry that counted last, a
// quota's from its current period.
func (r *Room) Refund(x Exec, l *Charge, n, now int64) (int64, error) {
	key := l.Key
	s, _ := x.LockKey(key)
	defer x.Unlock(s)
	e, found, err := s.GetKind(key, l.Kind, now)
	if err != nil || !found {
		return 0, err // gone: nothing left to give back
	}
	switch l.Kind {
	case keyspace.KindGCRA:
		if l.Step <= 0 {
			return 0, nil
		}
		base := l.Anchor
		if base < 0 {
			base = s.Word(e) - min(l.Units*l.Step, s.Word(e))
		}
		tat, given := gcra.Refund(s.Word(e), base, l.Units, l.Units-n, l.Step, now)
		s.SetWord(e, tat)
		// The time given back, in units to the nearest: a refund a
		// nanosecond after the charge gives back all but that nanosecond.
		return min((given+l.Step/2)/l.Step, n), nil
	case keyspace.KindSlidingCounter:
		return refundWindow[window.CounterState](s, e, l, n)
	case keyspace.KindFixedWindow:
		return refundWindow[window.FixedState](s, e, l, n)
	case keyspace.KindSlidingLog:
		st, err := logAt(x, s, e)
		if err != nil {
			return 0, err
		}
		st, given := st.Refund(anchorOr(l.Anchor, st.Tail()), n)
		if given == 0 {
			return 0, nil
		}
		return given, StoreLog(s, key, e, true, &st, s.Word(e), &x.Scratch().Enc)
	case keyspace.KindQuota:
		st, err := r.QuotaAt(s, e)
		if err != nil {
			return 0, err
		}
		start := l.Anchor
		if start < 0 {
			if _, err := st.Get(now); err != nil { // rolled to the current period
				return 0, err
			}
			start = st.Start
		}
		given, err := st.RefundIn(start, now, n)
		if err != nil || given == 0 {
			return 0, err
		}
		if err := StoreQuota(s, key, e, true, &st); err != nil {
			return 0, err
		}
		x.QuotaChanged(key, &st)
		return given, nil
	}
	return 0, nil
}

// anchorOr is anchor, or for a refund of the latest charge (-1) latest:
// the (sub-)window the state counted its last charge in.
func anchorOr(anchor, latest int64) int64 {
	if anchor < 0 {
		return latest
	}
	return anchor
}

// Force charges n more units of l at now, past its limit if it must, and
// returns how many were charged.
func (r *Room) Force(x Exec, l *Charge, n, now int64) (int64, error) {
	key := l.Key
	s, _ := x.LockKey(key)
	defer x.Unlock(s)
	e, found, err := s.GetKind(key, l.Kind, now)
	if err != nil {
		return 0, err
	}
	p := window.Params{Limit: l.Limit, Window: l.Step}
	switch l.Kind {
	case keyspace.KindGCRA:
		var tat int64
		if found {
			tat = s.Word(e)
		}
		next, err := gcra.Force(tat, found, now, n, l.Step)
		if err != nil {
			return 0, err
		}
		if found {
			s.SetWord(e, next)
		} else if _, err := s.Insert(key, keyspace.KindGCRA, next, nil); err != nil {
			return 0, err
		}
		return n, nil
	case keyspace.KindSlidingCounter:
		return forceWindow[window.CounterState](s, e, found, l, p, n, now)
	case keyspace.KindFixedWindow:
		return forceWindow[window.FixedState](s, e, found, l, p, n, now)
	case keyspace.KindSlidingLog:
		var st window.LogState
		if found {
			if st, err = logAt(x, s, e); err != nil {
				return 0, err
			}
			st = st.Clone()
		}
		st, exp, err := st.Force(found, now, p, n)
		if err != nil {
			return 0, err
		}
		return n, StoreLog(s, key, e, found, &st, exp, &x.Scratch().Enc)
	case keyspace.KindQuota:
		if !found {
			return 0, nil // its schedule went with it: nothing to count in
		}
		st, err := r.QuotaAt(s, e)
		if err != nil {
			return 0, err
		}
		st, err = quota.Force(st, true, now, st.Limit, st.Schedule, n)
		if err != nil {
			return 0, err
		}
		if err := StoreQuota(s, key, e, true, &st); err != nil {
			return 0, err
		}
		x.QuotaChanged(key, &st)
		return n, nil
	}
	return 0, nil
}

// settledWindow is a window kind whose state lives in its record
// (sliding counter, fixed window), as a reservation settles it.
type settledWindow[S any] interface {
	Refund(w, start, n int64) (S, int64)
	Force(exists bool, now int64, p window.Params, cost int64) (S, int64, error)
	Latest() int64
}

// refundWindow gives n units of l back from the record e holds.
func refundWindow[S settledWindow[S]](s *keyspace.Slot, e keyspace.Entry, l *Charge, n int64) (int64, error) {
	st, err := WindowStateOf[S](s, e)
	if err != nil {
		return 0, err
	}
	next, given := st.Refund(l.Step, anchorOr(l.Anchor, st.Latest()), n)
	return given, StoreInline(s, l.Key, l.Kind, e, true, s.Word(e), &next)
}

// forceWindow charges n more units of l at now into the record e holds
// (found) or a new one.
func forceWindow[S settledWindow[S]](s *keyspace.Slot, e keyspace.Entry, found bool, l *Charge, p window.Params, n, now int64) (int64, error) {
	var st S
	if found {
		var err error
		if st, err = WindowStateOf[S](s, e); err != nil {
			return 0, err
		}
	}
	next, exp, err := st.Force(found, now, p, n)
	if err != nil {
		return 0, err
	}
	return n, StoreInline(s, l.Key, l.Kind, e, found, exp, &next)
}

// logAt is the sliding log a record holds (decoded into the apply's
// scratch when inline: valid until the next decode).
func logAt(x Exec, s *keyspace.Slot, e keyspace.Entry) (window.LogState, error) {
	if e.Inline() {
		if err := x.Scratch().Log.DecodeReusing(s.State(e)); err != nil {
			return window.LogState{}, err
		}
		return x.Scratch().Log, nil
	}
	st, ok := s.Object(e).(*window.LogState)
	if !ok || st == nil {
		return window.LogState{}, window.ErrCorrupt
	}
	return *st, nil
}
