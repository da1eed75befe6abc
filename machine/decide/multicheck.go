package decide

import (
	"bytes"
	"errors"

	"github.com/sluice-rl/sluice/gcra"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/slot"
	"github.com/sluice-rl/sluice/window"
)

// A multi-limit check (RL.CHECK, RL.CHECKALL) looks at every limit at one
// instant under one slot lock, then charges all of them or none: each
// limit's next state is worked out without being stored, and only when no
// limit refuses are they written. The algorithms are pure (state, now,
// params → next state, result), so "work out, then store" is exactly what
// one check at a time would do, minus the partial charges.

// maxLimits bounds the limits of one multi-check.
const maxLimits = 64

// limitCheck is one limit of a multi-check: which counter and how it
// counts, then what the check found.
type limitCheck struct {
	// key is the counter key; kind the algorithm's keyspace kind.
	key  []byte
	kind keyspace.Kind
	// The algorithm's parameters (the ones of kind).
	gcra       gcra.Limit
	win        window.Params
	quotaLimit int64
	sched      quota.Schedule
	// name and window (seconds) are what the reply names when this limit
	// binds; shadow limits count but never refuse; deny always refuses.
	name   string
	window int64
	shadow bool
	deny   bool
	// quotaMode limits refuse only together: a request is refused by them
	// only when every quota-mode limit of it refuses (envoy's quota_mode).
	quotaMode bool
	// rule is the rule the limit comes from (RL.CHECK), for metrics.
	rule *policy.Rule
	// cost, when hasCost, is this limit's own cost (a descriptor's
	// hits_addend) instead of the request's.
	cost    int64
	hasCost bool

	// What the check found: the result, whether the next state must be
	// stored, the next word and state.
	res   limiter.Result
	store bool
	found bool
	// slot is the key's slot, locked by the caller; slotIndex its number.
	slot      *keyspace.Slot
	slotIndex int
	// entry is the key's record when inSlot (the key existed before this
	// check): valid until something is inserted into the slot — moved
	// says something was (a holder's record), so it is looked up again.
	entry   keyspace.Entry
	inSlot  bool
	moved   bool
	word    int64
	counter window.CounterState
	log     window.LogState
	fixed   window.FixedState
	quota   quota.State
}

// decideRefusal reports whether the limits refuse the request: a
// non-shadow limit refuses, or every quota-mode limit does. A quota-mode
// limit that refused alone is marked shadow-like (not binding).
func decideRefusal(checks []limitCheck) bool {
	refused, quota, quotaRefused := false, 0, 0
	for i := range checks {
		c := &checks[i]
		switch {
		case c.shadow:
		case c.quotaMode:
			quota++
			if c.res.Limited {
				quotaRefused++
			}
		case c.res.Limited:
			refused = true
		}
	}
	if quota > 0 && quotaRefused == quota {
		return true
	}
	if quotaRefused > 0 {
		for i := range checks {
			if checks[i].quotaMode && checks[i].res.Limited {
				checks[i].shadow = true // outvoted: reported like a shadow refusal
			}
		}
	}
	return refused
}

// lastStoring is the latest check before i on i's key that will store a
// next state (or nil): check i starts from that state, not the stored one.
func lastStoring(checks []limitCheck, i int) *limitCheck {
	for j := i - 1; j >= 0; j-- {
		if checks[j].store && bytes.Equal(checks[j].key, checks[i].key) {
			return &checks[j]
		}
	}
	return nil
}

// storedLater reports whether a check after i stores a state on i's key
// (it started from i's, so it holds the one to keep).
func storedLater(checks []limitCheck, i int) bool {
	for j := i + 1; j < len(checks); j++ {
		if checks[j].store && bytes.Equal(checks[j].key, checks[i].key) {
			return true
		}
	}
	return false
}

// evaluate works out what checking c at now would do, starting from the
// stored state, or from prev's next state (an earlier check of the same
// request on the same key that admitted). It stores nothing.
//
// logBuf holds the arrays a sliding log in its record is decoded into.
func (c *limitCheck) evaluate(m *Room, s *keyspace.Slot, now, cost int64, prev *limitCheck, logBuf *window.LogState) error {
	if c.deny {
		// A limit of 0 refuses every unit; a request of none (a peek) asks
		// for nothing and passes, as Envoy counts 0 hits against 0.
		c.res = limiter.Result{Limited: cost > 0, RetryAfter: limiter.Never}
		return nil
	}
	var obj any
	switch {
	case prev != nil && prev.kind != c.kind:
		return keyspace.ErrWrongType
	case prev != nil:
		c.found, c.word = true, prev.word
		c.entry, c.inSlot = prev.entry, prev.inSlot
		c.counter, c.log, c.fixed, c.quota = prev.counter, prev.log, prev.fixed, prev.quota
	default:
		e, found, err := s.GetKind(c.key, c.kind, now)
		if err != nil {
			return err
		}
		c.found, c.entry, c.inSlot = found, e, found
		if found {
			c.word, obj = s.Word(e), s.Object(e)
		}
	}
	var err error
	switch c.kind {
	case keyspace.KindGCRA:
		c.word, c.store, c.res, err = gcra.Throttle(c.word, c.found, now, c.gcra, cost)
	case keyspace.KindSlidingCounter:
		if prev == nil && c.found {
			if c.counter, err = limiters.WindowStateOf[window.CounterState](s, c.entry); err != nil {
				return err
			}
		}
		c.counter, c.store, c.word, c.res, err = c.counter.Check(c.found, now, c.win, cost)
	case keyspace.KindSlidingLog:
		if prev == nil && c.found {
			if c.entry.Inline() {
				if err = logBuf.DecodeReusing(s.State(c.entry)); err != nil {
					return err
				}
				c.log = *logBuf
			} else {
				st, ok := obj.(*window.LogState)
				if !ok || st == nil {
					return window.ErrCorrupt
				}
				c.log = *st
			}
		}
		c.log, c.store, c.word, c.res, err = c.log.Check(c.found, now, c.win, cost)
		if err == nil && c.store && c.inSlot && c.entry.Inline() && !limiters.LogFitsRecord(&c.log) {
			// It outgrows its record and becomes an object: an insert,
			// committed after the in-place updates (commit looks it up).
			c.inSlot = false
		}
	case keyspace.KindFixedWindow:
		if prev == nil && c.found {
			if c.fixed, err = limiters.WindowStateOf[window.FixedState](s, c.entry); err != nil {
				return err
			}
		}
		c.fixed, c.store, c.word, c.res, err = c.fixed.Check(c.found, now, c.win, cost)
	case keyspace.KindQuota:
		if prev == nil && c.found {
			if c.quota, err = m.limiters.QuotaAt(s, c.entry); err != nil {
				return err
			}
		}
		c.quota, c.store, c.res, err = quota.Check(c.quota, c.found, now, c.quotaLimit, c.sched, cost)
		c.word = c.quota.ExpireAt()
		if err == nil {
			if start, end, berr := c.sched.Bounds(now); berr == nil {
				c.window = limiter.Seconds(end - start)
			}
		}
	}
	return err
}

// commit stores c's next state under the slot lock. When entriesValid
// (nothing inserted since evaluate) the record found then is used;
// otherwise records may have moved and the key is looked up again.
func (c *limitCheck) commit(x *apply, s *keyspace.Slot, now int64, entriesValid bool) error {
	e, found := c.entry, c.inSlot
	if !entriesValid || !found {
		var err error
		if e, found, err = s.GetKind(c.key, c.kind, now); err != nil {
			return err
		}
	}
	var obj any
	switch c.kind {
	case keyspace.KindGCRA:
		if found {
			s.SetWord(e, c.word)
			return nil
		}
	case keyspace.KindSlidingCounter:
		return limiters.StoreInline(s, c.key, c.kind, e, found, c.word, &c.counter)
	case keyspace.KindSlidingLog:
		return limiters.StoreLogOr(s, c.key, e, found, &c.log, c.word, &x.lim.Enc, x.m.Faults.LogMove)
	case keyspace.KindFixedWindow:
		return limiters.StoreInline(s, c.key, c.kind, e, found, c.word, &c.fixed)
	case keyspace.KindQuota:
		// Journaled by multiCheck once every limit is stored.
		return limiters.StoreQuota(s, c.key, e, found, &c.quota)
	}
	_, err := s.Insert(c.key, c.kind, c.word, obj)
	return err
}

// checkSlots lists in l the slots of checks' counters and, with domain
// records (overrides, scale) to read, the slot of domainKey, for HoldGroup.
// It returns l and the domain's slot number (-1 without domain records).
func checkSlots(l *room.SlotLocks, ks *keyspace.Keyspace, checks []limitCheck, domainKey []byte, domainRecords bool) (*room.SlotLocks, int) {
	l.Reset(ks)
	for i := range checks {
		checks[i].slotIndex = slot.Of(checks[i].key)
		l.Slots = append(l.Slots, checks[i].slotIndex)
	}
	domain := -1
	if domainRecords {
		domain = slot.Of(domainKey)
		l.Slots = append(l.Slots, domain)
	}
	return l, domain
}

// lockChecks sets each check's slot from the held group and returns the
// instant to decide at.
func (x *apply) lockChecks(checks []limitCheck) (now int64) {
	for i := range checks {
		checks[i].slot, now = x.LockSlot(checks[i].slotIndex)
	}
	return now
}

// multiCheck checks every limit at now, each under its slot (locked), and
// charges all or none. It returns the index of the binding limit (-1 when
// there are none) and whether the request was refused.
func multiCheck(x *apply, now, cost int64, checks []limitCheck, hold holder) (binding int, refused bool, err error) {
	for i := range checks {
		c := &checks[i]
		own := cost
		if c.hasCost {
			own = c.cost
		}
		if err := c.evaluate(x.m, c.slot, now, own, lastStoring(checks, i), x.bufs.logScratch(i)); err != nil {
			return -1, false, err
		}
	}
	refused = decideRefusal(checks)
	if !refused {
		if hold != nil {
			if err := hold.hold(checks); err != nil {
				return -1, false, err
			}
		}
		if err := commitAll(x, now, checks); err != nil {
			if hold != nil {
				hold.undo()
			}
			return -1, false, err
		}
	}
	return bindingLimit(checks, refused), refused, nil
}

// commitAll stores every limit's next state, or none (undo.go): updates in
// place first, while the records found are still where they were, then the
// inserts; the quota changes are journaled once all are stored.
func commitAll(x *apply, now int64, checks []limitCheck) error {
	stores := 0
	for i := range checks {
		if checks[i].store && !storedLater(checks, i) {
			stores++
		}
	}
	u := &x.bufs.undo
	u.reset()
	n := 0
	for _, inserts := range [2]bool{false, true} {
		for i := range checks {
			c := &checks[i]
			if !c.store || c.inSlot == inserts || storedLater(checks, i) {
				continue
			}
			// A failed store writes nothing, so the last store needs no
			// note (no store comes after it to fail) — but a sliding log,
			// which may move out of its record (a delete, then an insert
			// that can fail).
			var err error
			valid := !inserts && !c.moved
			if n < stores-1 || c.kind == keyspace.KindSlidingLog {
				err = u.note(checks, i, now, valid)
			}
			if err == nil {
				if err = x.m.storeFault(n); err == nil {
					err = c.commit(x, c.slot, now, valid)
				}
			}
			n++
			if err != nil {
				if uerr := u.rollback(checks, now); uerr != nil {
					return errors.Join(err, uerr)
				}
				return err
			}
		}
	}
	for i := range checks {
		c := &checks[i]
		if c.store && c.kind == keyspace.KindQuota && !storedLater(checks, i) {
			x.QuotaChanged(c.key, &c.quota)
		}
	}
	return nil
}

// bindingLimit picks the limit the reply reports: when refused, the
// refusing one with the longest retry_after (one that can never pass
// counts as longest); when allowed, the one with the least remaining.
// Shadow limits bind only when every limit is a shadow one. Ties go to the
// first.
func bindingLimit(checks []limitCheck, refused bool) int {
	best := -1
	allShadow := true
	for i := range checks {
		if !checks[i].shadow {
			allShadow = false
			break
		}
	}
	for i := range checks {
		c := &checks[i]
		if c.shadow && !allShadow {
			continue
		}
		if refused && (!c.res.Limited || c.shadow) {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &checks[best]
		if refused {
			if retryRank(c.res.RetryAfter) > retryRank(b.res.RetryAfter) {
				best = i
			}
		} else if c.res.Remaining < b.res.Remaining {
			best = i
		}
	}
	return best
}

func retryRank(ns int64) int64 {
	if ns == limiter.Never {
		return 1<<63 - 1
	}
	return ns
}

// policyWindow is the window, in seconds, over which the reply's limit
// holds: what a client's RateLimit-Policy says with it (q=limit;w=this),
// so the remaining a reply reports never exceeds the policy's quota. The
// check's own window, but for GCRA, whose limit is its burst + 1: the time
// an empty key takes to refill that (gcra.Limit.PolicyWindow).
func (c *limitCheck) policyWindow() int64 {
	if c.kind == keyspace.KindGCRA && !c.deny {
		return c.gcra.PolicyWindow()
	}
	return c.window
}

// noteBinding records in the apply's outcome what metrics and refusal
// events read of a multi-check (binding ≥ 0): the binding rule, a
// shadow-mode rule that would have refused, a refusal's limit and
// retry_after. It returns the binding limit's five-integer reply.
func (x *apply) noteBinding(checks []limitCheck, binding int, refused bool) [5]int64 {
	c := &checks[binding]
	x.out.Rule = c.rule
	for i := range checks {
		if checks[i].shadow && checks[i].res.Limited && checks[i].rule != nil && checks[i].rule.ShadowMode {
			x.out.Shadow = checks[i].rule
			break
		}
	}
	r := c.res
	if c.shadow {
		// A shadow refusal allows: no wait to report (it goes to metrics
		// and events instead).
		r.Limited, r.RetryAfter = false, limiter.Never
	}
	five := r.Reply()
	if refused {
		x.out.Limit, x.out.RetryAfter = five[1], five[3]
	}
	return five
}
