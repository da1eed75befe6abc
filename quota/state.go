package quota

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/sluice-rl/sluice/limiter"
)

// State is one quota key: its schedule and limit, the current period's
// bounds (Unix ns, Start <= End) and the units used in it.
type State struct {
	// Schedule and Limit are those of the last admitted CHECK.
	Schedule Schedule
	Limit    int64
	// Used counts units admitted in [Start, End), minus refunds; it may
	// exceed Limit after the limit was lowered.
	Used int64
	// Start and End bound the stored period, Unix ns.
	Start, End int64
}

// Usage is what QUOTA.GET, REFUND and RESET report.
type Usage struct {
	Used, Limit, Remaining int64
	// Start and End bound the current period, Unix ns.
	Start, End int64
}

// Check decides QUOTA.CHECK. st and exists are the stored key; the request
// brings now, limit, sch and cost. It returns the key's new state and whether
// to store it, which is exactly when units were admitted: refused requests are
// not counted and leave the key as it was (a new schedule or limit is stored
// by the next admitted request), and COST 0 is a peek that never creates or
// changes a key. A peek is refused only when the key is already over its
// limit (after the limit was lowered). The package comment describes how a
// schedule differing from the stored one is handled.
func Check(st State, exists bool, now, limit int64, sch Schedule, cost int64) (State, bool, limiter.Result, error) {
	if limit < 0 {
		return st, false, limiter.Result{}, fmt.Errorf("check: limit: %w", ErrNegative)
	}
	if cost < 0 {
		return st, false, limiter.Result{}, fmt.Errorf("check: cost: %w", ErrNegative)
	}
	if err := sch.Validate(); err != nil {
		return st, false, limiter.Result{}, fmt.Errorf("check: %w", err)
	}
	if now < 0 || now > MaxInstant {
		return st, false, limiter.Result{}, fmt.Errorf("check: %w", ErrOutOfRange)
	}

	cur, err := st.current(exists, now, sch)
	if err != nil {
		return st, false, limiter.Result{}, fmt.Errorf("check: %w", err)
	}
	cur.Limit = limit

	res := limiter.Result{Limit: limit, RetryAfter: limiter.Never, ResetAfter: cur.End - now}
	switch {
	case cost > limit:
		res.Limited = true
	case cost > limit-cur.Used: // also refuses a peek when already over a lowered limit
		res.Limited = true
		res.RetryAfter = res.ResetAfter
	default:
		cur.Used += cost
	}
	res.Remaining = max(limit-cur.Used, 0)
	return cur, cost > 0 && !res.Limited, res, nil
}

// current is st as a request with schedule sch sees it at now: the stored
// period, or the one holding now (a changed schedule keeps the units used
// when its period does not start after the stored one's).
func (st State) current(exists bool, now int64, sch Schedule) (State, error) {
	cur := st
	if !exists || !st.Schedule.Equal(sch) || now >= st.End {
		start, end, err := sch.Bounds(now)
		if err != nil {
			return st, err
		}
		cur = State{Start: start, End: end, Limit: st.Limit}
		if exists && start <= st.Start {
			cur.Used = st.Used
		}
	}
	cur.Schedule = sch
	return cur, nil
}

// Force counts cost units at now under limit and sch whatever the limit
// says (the work they stand for is done): used may pass the limit, and
// later requests are refused until the period ends.
func Force(st State, exists bool, now, limit int64, sch Schedule, cost int64) (State, error) {
	if limit < 0 || cost < 0 {
		return st, fmt.Errorf("force: %w", ErrNegative)
	}
	if err := sch.Validate(); err != nil {
		return st, fmt.Errorf("force: %w", err)
	}
	if now < 0 || now > MaxInstant {
		return st, fmt.Errorf("force: %w", ErrOutOfRange)
	}
	cur, err := st.current(exists, now, sch)
	if err != nil {
		return st, fmt.Errorf("force: %w", err)
	}
	cur.Limit = limit
	cur.Used += min(cost, math.MaxInt64-cur.Used)
	return cur, nil
}

// RefundIn gives back up to n units charged in the period that started at
// start, at now: nothing once that period has ended (its units no longer
// count). It returns the units given back.
func (st *State) RefundIn(start, now, n int64) (int64, error) {
	if n < 0 {
		return 0, fmt.Errorf("refund: %w", ErrNegative)
	}
	if err := st.roll(now); err != nil {
		return 0, fmt.Errorf("refund: %w", err)
	}
	if st.Start != start {
		return 0, nil
	}
	g := min(n, st.Used)
	st.Used -= g
	return g, nil
}

// Get rolls st to the period containing now if its period has ended (used 0
// then) and reports it. It changes st only by rolling; store st back.
// A now before Start (the clock went back) keeps the stored period.
func (st *State) Get(now int64) (Usage, error) {
	if err := st.roll(now); err != nil {
		return Usage{}, fmt.Errorf("get: %w", err)
	}
	return st.usage(), nil
}

// Refund gives n units back to the current period (rolled as in Get); used
// never goes below 0.
func (st *State) Refund(now, n int64) (Usage, error) {
	if n < 0 {
		return Usage{}, fmt.Errorf("refund: %w", ErrNegative)
	}
	if err := st.roll(now); err != nil {
		return Usage{}, fmt.Errorf("refund: %w", err)
	}
	st.Used -= min(n, st.Used)
	return st.usage(), nil
}

// Reset zeroes the period containing now. Unlike Get it also recomputes the
// bounds when now is before Start, so an operator can undo a period that a
// clock running ahead had moved into the future.
func (st *State) Reset(now int64) (Usage, error) {
	if now < 0 || now > MaxInstant {
		return Usage{}, fmt.Errorf("reset: %w", ErrOutOfRange)
	}
	if now < st.Start || now >= st.End {
		start, end, err := st.Schedule.Bounds(now)
		if err != nil {
			return Usage{}, fmt.Errorf("reset: %w", err)
		}
		st.Start, st.End = start, end
	}
	st.Used = 0
	return st.usage(), nil
}

// ExpireAt is when the command layer may delete the key: the end of the
// stored period plus one more period length of idleness (saturating).
func (st State) ExpireAt() int64 {
	span := st.End - st.Start
	if st.End > math.MaxInt64-span {
		return math.MaxInt64
	}
	return st.End + span
}

func (st *State) roll(now int64) error {
	if now < 0 || now > MaxInstant {
		return ErrOutOfRange
	}
	if now < st.End {
		return nil
	}
	start, end, err := st.Schedule.Bounds(now)
	if err != nil {
		return err
	}
	st.Start, st.End, st.Used = start, end, 0
	return nil
}

func (st State) usage() Usage {
	return Usage{Used: st.Used, Limit: st.Limit, Remaining: max(st.Limit-st.Used, 0), Start: st.Start, End: st.End}
}

// Bytes is the memory the state holds (its zone is shared, not counted).
func (s *State) Bytes() int { return int(unsafe.Sizeof(*s)) }
