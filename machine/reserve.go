package machine

import (
	"errors"
	"strings"

	"github.com/sluice-rl/sluice/gcra"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
	"github.com/sluice-rl/sluice/window"
)

// RL.RESERVE, RL.SETTLE and RL.CANCEL: charge now, settle when the cost is
// known (an LLM response's tokens). A reserve is RL.CHECK that also keeps,
// under the caller's id, what each limit was charged and where; a settle
// gives back what the request did not use (gcra.Refund, the window
// kinds' and quota's Refund: never laxer than the replay without those
// units, exact when nothing else touched the key) or charges what it used
// beyond (Force: past the limit if it must, the work is done). The
// reservation is a record of the domain's slot, so it is replicated and
// snapshotted like the counters; one never settled keeps its charge and is
// swept when its ttl ends.

func reserveCommands() []*Command {
	descriptors := Arg{Name: "descriptor", Type: "block", Token: "DESCRIPTOR", Multiple: true, Sub: []Arg{
		{Name: "entry", Type: "block", Multiple: true, Sub: []Arg{{Name: "key", Type: "string"}, {Name: "value", Type: "string"}}},
	}}
	return []*Command{{
		Name: "rl.reserve", Decides: true, slots: allSlots, Arity: -7, Flags: []string{"write", "denyoom"},
		FirstKey: 1, LastKey: 1, Step: 1,
		Group: "sluice", Since: "1.3.0", Complexity: "O(D) where D is the number of descriptor entries",
		Summary: "RL.CHECK that holds what it charged under a reservation id for ttl seconds, to be settled with the actual cost: replies as RL.CHECK; the same id again while held replies the same and charges nothing.",
		Args: []Arg{
			{Name: "domain", Type: "key"}, {Name: "reservation-id", Type: "string"}, {Name: "ttl-seconds", Type: "integer"},
			{Name: "cost", Type: "integer", Token: "COST", Optional: true}, descriptors,
		},
		run: runReserve, check: checkReserve,
	}, {
		Name: "rl.settle", slots: allSlots, Arity: 4, Flags: []string{"write"},
		FirstKey: 1, LastKey: 1, Step: 1,
		Group: "sluice", Since: "1.3.0", Complexity: "O(L) where L is the number of limits reserved",
		Summary: "Settles a reservation with the actual cost: gives back what was not used, charges what was used beyond (past the limit if it must); replies [name, reserved, actual, refunded, charged] per limit, or nil for an unknown or expired id.",
		Args:    []Arg{{Name: "domain", Type: "key"}, {Name: "reservation-id", Type: "string"}, {Name: "actual-cost", Type: "integer"}},
		run:     runSettle, check: checkSettle,
	}, {
		Name: "rl.cancel", slots: allSlots, Arity: 3, Flags: []string{"write", "fast"},
		FirstKey: 1, LastKey: 1, Step: 1,
		Group: "sluice", Since: "1.3.0", Complexity: "O(L) where L is the number of limits reserved",
		Summary: "RL.SETTLE with an actual cost of 0: gives back everything the reservation holds.",
		Args:    []Arg{{Name: "domain", Type: "key"}, {Name: "reservation-id", Type: "string"}},
		run:     runSettle, check: checkSettle,
	}}
}

// maxReserveTTL bounds a reservation's ttl (a day).
const maxReserveTTL = 86400

// parseReserveHead reads RL.RESERVE's id and ttl (seconds, in ns).
func parseReserveHead(args [][]byte) (ttl int64, bad string) {
	if len(args[2]) == 0 || len(args[2]) > maxReservationID {
		return 0, "ERR a reservation id must be 1 to 256 bytes"
	}
	n, ok := resp.ParseInt(args[3])
	if !ok || n < 1 || n > maxReserveTTL {
		return 0, "ERR ttl-seconds must be an integer in [1, 86400]"
	}
	return n * 1_000_000_000, ""
}

func checkReserve(m *Machine, args [][]byte) string {
	if _, bad := parseReserveHead(args); bad != "" {
		return bad
	}
	p := m.plan()
	defer m.release(p)
	return parseDescriptors(args[4:], p)
}

// appendReservationKey appends where a domain's reservation id is held: in
// the domain's slot, beside its overrides and scale.
func appendReservationKey(dst []byte, domain string, id []byte) []byte {
	dst = policy.AppendDescriptorKey(dst, domain, nil)
	dst = append(dst, "#reservation:"...)
	return append(dst, id...)
}

// runReserve is RL.RESERVE <domain> <id> <ttl> [COST n] DESCRIPTOR k v … [DESCRIPTOR …].
func runReserve(x *exec, args [][]byte) {
	ttl, bad := parseReserveHead(args)
	p := x.m.plan()
	defer x.m.release(p)
	if bad == "" {
		bad = parseDescriptors(args[4:], p)
	}
	if bad != "" {
		x.fail(bad)
		return
	}
	domain := view(args[1])
	p.forDomain(domain, x.m.policyRecords.Load())
	if d := x.m.rules().Domain(domain); d != nil {
		p.addMatched(d)
	}
	p.seal()
	// The reservation's key goes after the plan's: the checks' keys are
	// slices of what is there (an append that moves the array leaves them
	// on the old one, as valid).
	start := len(p.keys)
	p.keys = appendReservationKey(p.keys, domain, args[2])
	key := p.keys[start:]
	p.anchor = key // the domain's slot, where the reservation is kept
	now, ds, took, err := x.lockPlan(p)
	var fenced fenceError
	switch {
	case errors.As(err, &fenced) && resp.EqualFold(args[0], "rl.reserve"):
		// A reservation is kept, and settled, by its domain's group: its
		// counters must be there too (a check's parts are split instead).
		// Asking again does not help: CROSSSLOT, not the check's TRYAGAIN.
		detail, _, _ := strings.Cut(strings.TrimPrefix(string(fenced), "TRYAGAIN "), ":")
		x.fail("CROSSSLOT " + detail + "; RL.RESERVE's counters must all be in its domain's group: reservations across groups are not supported yet (RL.CHECK is)")
		return
	case err != nil:
		x.error(err)
		return
	}
	defer x.releaseGroup(&p.locks, took)
	e, found, err := ds.GetKind(key, keyspace.KindReservation, now)
	if err != nil {
		x.error(err)
		return
	}
	if found {
		// A retry of a reserve whose reply was lost: the same answer,
		// nothing charged again.
		if r, ok := ds.Object(e).(*ReservationState); ok && r != nil {
			x.answerCheck(r.Reply)
			return
		}
		x.error(errCorruptReservation)
		return
	}
	h := &p.reserving
	*h = reserving{state: &ReservationState{}, key: key, slot: ds, at: now, expireAt: now + ttl, cost: p.cost}
	if len(p.checks) == 0 {
		// Nothing limits the request: nothing is charged, so nothing is
		// held either — a flood of ids that match no rule must not take
		// memory. Its settle answers as an unknown id's (nil).
		x.answerCheck(noLimit)
		return
	}
	v, err := x.decideLocked(p, now, ds, h)
	if err != nil {
		x.error(err)
		return
	}
	res := x.checkResult(p.checks, v)
	if !v.refused {
		h.state.Reply = res
		x.m.reservations.reserved.Add(1)
	}
	x.answerCheck(res)
}

// heldAs is a reservation a decision other than RL.RESERVE's keeps (a
// group's part of an RL.SHOULDRATELIMIT across groups): its id and ttl
// (ns).
type heldAs struct {
	id  []byte
	ttl int64
}

// errReservationHeld: a part's reservation id is held already (ids are
// random, so this is a replayed part: it must not charge twice).
var errReservationHeld = errors.New("the reservation id is held already")

// start makes the holder of a decision that keeps its charge as held, at
// the plan's anchor in domainSlot.
func (held *heldAs) start(p *plan, domainSlot *keyspace.Slot, now int64) (*reserving, error) {
	_, found, err := domainSlot.GetKind(p.anchor, keyspace.KindReservation, now)
	switch {
	case err != nil:
		return nil, err
	case found:
		return nil, errReservationHeld
	}
	p.reserving = reserving{state: &ReservationState{}, key: p.anchor, slot: domainSlot, at: now, expireAt: now + held.ttl, cost: p.cost}
	return &p.reserving, nil
}

// reserving is RL.RESERVE's holder: it keeps the reservation in the
// domain's slot once the limits admit, before they are charged.
type reserving struct {
	state    *ReservationState
	key      []byte
	slot     *keyspace.Slot
	at       int64
	expireAt int64
	cost     int64
}

func (h *reserving) hold(checks []limitCheck) error {
	// The counter keys, copied out of the plan, share one array.
	n := 0
	for i := range checks {
		n += len(checks[i].key)
	}
	keys := make([]byte, 0, n)
	h.state.Limits = make([]HeldLimit, 0, len(checks))
	for i := range checks {
		if l, ok := heldLimit(&checks[i], h.cost); ok {
			start := len(keys)
			keys = append(keys, l.Key...)
			l.Key = keys[start:len(keys):len(keys)]
			h.state.Limits = append(h.state.Limits, l)
		}
	}
	if _, err := h.slot.Insert(h.key, keyspace.KindReservation, h.expireAt, h.state); err != nil {
		return err
	}
	domainSlot := slot.Of(h.key)
	for i := range checks {
		if checks[i].slotIndex == domainSlot {
			checks[i].moved = true // the insert may have moved its record
		}
	}
	return nil
}

func (h *reserving) undo() {
	if e, ok := h.slot.Get(h.key, h.at); ok {
		h.slot.Delete(e)
	}
}

// heldLimit is what a reservation keeps of check c (after evaluate, before
// commit: its next state says where the charge goes); false for a limit
// it cannot hold (a deny, which admits only requests of no cost).
func heldLimit(c *limitCheck, cost int64) (HeldLimit, bool) {
	units := cost
	if c.hasCost {
		units = c.cost
	}
	if !c.store {
		// Charged nothing (a shadow limit that would have refused, a
		// quota-mode limit outvoted): nothing to give back.
		units = 0
	}
	if c.deny || !refundable(c.kind) {
		return HeldLimit{}, false
	}
	l := HeldLimit{Key: c.key, Kind: c.kind, Name: c.name, Units: units}
	switch c.kind {
	case keyspace.KindGCRA:
		l.Step = c.gcra.EmissionInterval()
		l.Anchor = c.word - units*l.Step // where the charge started (base)
	case keyspace.KindSlidingCounter:
		l.Anchor, l.Step, l.Limit = c.counter.Start, c.win.Window, c.win.Limit
	case keyspace.KindFixedWindow:
		l.Anchor, l.Step, l.Limit = c.fixed.Start, c.win.Window, c.win.Limit
	case keyspace.KindSlidingLog:
		l.Anchor, l.Step, l.Limit = c.log.Tail(), c.win.Window, c.win.Limit
	case keyspace.KindQuota:
		l.Anchor = c.quota.Start
	}
	return l, true
}

func checkSettle(_ *Machine, args [][]byte) string {
	_, bad := parseSettle(args)
	return bad
}

// parseSettle reads RL.SETTLE's actual cost (RL.CANCEL's is 0).
func parseSettle(args [][]byte) (int64, string) {
	if len(args[2]) == 0 || len(args[2]) > maxReservationID {
		return 0, "ERR a reservation id must be 1 to 256 bytes"
	}
	if len(args) < 4 {
		return 0, ""
	}
	n, ok := resp.ParseInt(args[3])
	if !ok || n < 0 || n > maxRLSValue {
		return 0, "ERR actual-cost must be an integer in [0, 4294967295]"
	}
	return n, ""
}

// How a settle ends a reservation: at an actual cost (RL.SETTLE), or
// giving everything back (RL.CANCEL, RL.PART CANCEL).
type settleMode int

const (
	settleActual settleMode = iota
	settleCancel
)

// runSettle is RL.SETTLE <domain> <id> <actual> and RL.CANCEL <domain> <id>.
func runSettle(x *exec, args [][]byte) {
	actual, bad := parseSettle(args)
	if bad != "" {
		x.fail(bad)
		return
	}
	mode := settleActual
	if resp.EqualFold(args[0], "rl.cancel") {
		mode = settleCancel
	}
	settle(x, args[1], args[2], actual, mode, 0)
}

// settle ends the reservation id of domain. A tombstone (a part
// cancelled before its reserve) is nothing held: nil, and it stays.
// tombstone > 0 (ns) leaves one for that long where nothing is held (a
// part's cancel: its reserve may still be on its way).
func settle(x *exec, domain, id []byte, actual int64, mode settleMode, tombstone int64) {
	p := x.m.plan()
	defer x.m.release(p)
	p.keys = appendReservationKey(p.keys, view(domain), id)
	key := p.keys
	keySlot := slot.Of(key)
	// The counters' slots are known from the reservation: read it, hold
	// them all (with its own), and read it again — in between, another
	// apply may have settled it.
	for range 8 {
		s, now := x.lockSlot(keySlot)
		e, found, err := s.GetKind(key, keyspace.KindReservation, now)
		var r *ReservationState
		if found {
			r, _ = s.Object(e).(*ReservationState)
		}
		if err == nil && !found && tombstone > 0 {
			dead := &ReservationState{Cancelled: true, Reply: CheckResult{Limited: true, Limit: -1, Remaining: -1, RetryAfter: -1}}
			_, err = s.Insert(key, keyspace.KindReservation, now+tombstone, dead)
		}
		x.unlock(s)
		switch {
		case err != nil:
			x.error(err)
			return
		case !found || r != nil && r.Cancelled:
			x.w.Null()
			return
		case r == nil:
			x.error(errCorruptReservation)
			return
		}
		locks := &p.locks
		locks.reset(x.m.keys)
		locks.slots = append(locks.slots, keySlot)
		for i := range r.Limits {
			locks.slots = append(locks.slots, slot.Of(r.Limits[i].Key))
		}
		if err := x.m.fenceHeld(r); err != nil {
			x.error(err)
			return
		}
		took := x.holdGroup(locks)
		done := x.settleHeld(key, r, actual, mode)
		x.releaseGroup(locks, took)
		if done {
			return
		}
	}
	x.error(errors.New("the reservation kept changing while it was settled; try again"))
}

// settleHeld settles r, held at key, with every slot it touches held. It
// reports false when the key no longer holds r (settled or replaced
// meanwhile): the caller looks again.
func (x *exec) settleHeld(key []byte, r *ReservationState, actual int64, mode settleMode) bool {
	s, now := x.lockSlot(slot.Of(key))
	e, found, _ := s.GetKind(key, keyspace.KindReservation, now)
	if !found {
		x.w.Null()
		return true
	}
	if cur, _ := s.Object(e).(*ReservationState); cur != r {
		return false
	}
	s.Delete(e)
	if mode == settleCancel {
		x.m.reservations.cancelled.Add(1)
	} else {
		x.m.reservations.settled.Add(1)
	}
	x.w.Array(len(r.Limits))
	for i := range r.Limits {
		l := &r.Limits[i]
		var refunded, charged int64
		var err error
		switch {
		case actual < l.Units:
			refunded, err = x.refund(l, l.Units-actual, now)
		case actual > l.Units:
			charged, err = x.force(l, actual-l.Units, now)
		}
		if err != nil {
			// A limit that cannot be settled (its key now holds another
			// kind) is left as it is; the others settle.
			refunded, charged = 0, 0
		}
		x.w.Array(5)
		x.w.BulkString(l.Name)
		x.w.Int(l.Units)
		x.w.Int(actual)
		x.w.Int(refunded)
		x.w.Int(charged)
	}
	return true
}

// refund gives n units of l back at now and returns how many went back.
// An Anchor of -1 says the units were the latest charged (a refund with no
// reservation, Envoy's is_negative_hits): GCRA's from its TAT, the window
// kinds' from the (sub-)window or log entry that counted last, a
// quota's from its current period.
func (x *exec) refund(l *HeldLimit, n, now int64) (int64, error) {
	key := l.Key
	s, _ := x.lockKey(key)
	defer x.unlock(s)
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
		st, err := x.logAt(s, e)
		if err != nil {
			return 0, err
		}
		st, given := st.Refund(anchorOr(l.Anchor, st.Tail()), n)
		if given == 0 {
			return 0, nil
		}
		return given, storeLog(s, key, e, true, &st, s.Word(e), &x.bufs.enc)
	case keyspace.KindQuota:
		st, err := x.m.quotaAt(s, e)
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
		if err := storeQuota(s, key, e, true, &st); err != nil {
			return 0, err
		}
		x.journaled(x.m.quotaChanged(key, &st))
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

// force charges n more units of l at now, past its limit if it must, and
// returns how many were charged.
func (x *exec) force(l *HeldLimit, n, now int64) (int64, error) {
	key := l.Key
	s, _ := x.lockKey(key)
	defer x.unlock(s)
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
			if st, err = x.logAt(s, e); err != nil {
				return 0, err
			}
			st = st.Clone()
		}
		st, exp, err := st.Force(found, now, p, n)
		if err != nil {
			return 0, err
		}
		return n, storeLog(s, key, e, found, &st, exp, &x.bufs.enc)
	case keyspace.KindQuota:
		if !found {
			return 0, nil // its schedule went with it: nothing to count in
		}
		st, err := x.m.quotaAt(s, e)
		if err != nil {
			return 0, err
		}
		st, err = quota.Force(st, true, now, st.Limit, st.Schedule, n)
		if err != nil {
			return 0, err
		}
		if err := storeQuota(s, key, e, true, &st); err != nil {
			return 0, err
		}
		x.journaled(x.m.quotaChanged(key, &st))
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
func refundWindow[S settledWindow[S]](s *keyspace.Slot, e keyspace.Entry, l *HeldLimit, n int64) (int64, error) {
	st, err := windowStateOf[S](s, e)
	if err != nil {
		return 0, err
	}
	next, given := st.Refund(l.Step, anchorOr(l.Anchor, st.Latest()), n)
	return given, storeInline(s, l.Key, l.Kind, e, true, s.Word(e), &next)
}

// forceWindow charges n more units of l at now into the record e holds
// (found) or a new one.
func forceWindow[S settledWindow[S]](s *keyspace.Slot, e keyspace.Entry, found bool, l *HeldLimit, p window.Params, n, now int64) (int64, error) {
	var st S
	if found {
		var err error
		if st, err = windowStateOf[S](s, e); err != nil {
			return 0, err
		}
	}
	next, exp, err := st.Force(found, now, p, n)
	if err != nil {
		return 0, err
	}
	return n, storeInline(s, l.Key, l.Kind, e, found, exp, &next)
}

// logAt is the sliding log a record holds (decoded into the apply's
// scratch when inline: valid until the next decode).
func (x *exec) logAt(s *keyspace.Slot, e keyspace.Entry) (window.LogState, error) {
	if e.Inline() {
		if err := x.bufs.log.DecodeReusing(s.State(e)); err != nil {
			return window.LogState{}, err
		}
		return x.bufs.log, nil
	}
	st, ok := s.Object(e).(*window.LogState)
	if !ok || st == nil {
		return window.LogState{}, window.ErrCorrupt
	}
	return *st, nil
}
