package decide

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

func checkSettle(_ *Room, args [][]byte) string {
	_, bad := parseSettle(args)
	return bad
}

// parseSettle reads RL.SETTLE's actual cost (RL.CANCEL's is 0).
func parseSettle(args [][]byte) (int64, string) {
	if bad := checkReservationID(args[2]); bad != "" {
		return 0, bad
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
	// settleReturn: a lease's holder gives back what it did not use
	// (RL.LEASE RETURN): each limit is settled at its units less unused.
	settleReturn
)

// runSettle is RL.SETTLE <domain> <id> <actual> and RL.CANCEL <domain> <id>.
func runSettle(x *apply, args [][]byte) {
	actual, bad := parseSettle(args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	mode := settleActual
	if resp.EqualFold(args[0], "rl.cancel") {
		mode = settleCancel
	}
	settle(x, settling{domain: args[1], id: args[2], actual: actual, mode: mode, head: true})
}

// settling says what a settle ends.
type settling struct {
	domain, id []byte
	actual     int64
	// unused is what a lease's return gives back (settleReturn); headKey,
	// when set, is where its head is (a lease's grant, KindLease, in its
	// counter's slot; else the reservation's, KindReservation).
	unused  int64
	headKey []byte
	// grant, when set, is the lease's grant a return names (RL.LEASE
	// RETURN … GRANT <id>): a grant held under another id is not this
	// one (a late copy of a return of an earlier grant), and nothing is
	// settled.
	grant int64
	mode  settleMode
	// head: the head is settled, and with slots nil the parts it lists
	// (RL.SETTLE, RL.CANCEL: nothing is settled when no head is held).
	head bool
	// slots, when set, are the slots of the parts to settle (a
	// coordinator's share of a reservation across groups, a check's
	// part's cancel).
	slots []int
	// tombstone > 0 (ns) marks a part not held cancelled for that long:
	// its reserve may still be on its way (a check's part's cancel).
	tombstone int64
}

// heldRecord is a reservation's record read for a settle: where it is,
// what it held when read (nil: nothing, or a tombstone), and what tells
// whether it changed since (sameAs).
type heldRecord struct {
	key  []byte
	at   int
	kind keyspace.Kind
	// grant: a lease's grant, whose kind is the record's (grantKind).
	grant bool
	state *ReservationState
	seen  any
}

// read reads the record r names at now.
func (r *heldRecord) read(s *keyspace.Slot, now int64) error {
	var err error
	r.state, r.seen, err = reservationSeen(s, r.key, r.kind, now, true)
	return err
}

// sameAs reports whether the record r names still holds what r read.
func (r *heldRecord) sameAs(s *keyspace.Slot, now int64) bool {
	return sameReservation(s, r.key, r.kind, now, r.seen)
}

// live reports a record that holds a reservation (not a tombstone).
func (r *heldRecord) live() bool { return r.state != nil && !r.state.Cancelled }

// settle ends a reservation's records as st says: it reads them (each
// under its slot's lock), holds every slot they touch, and looks again —
// in between, another apply may have settled them. The reply is nil when
// nothing was held, else the rows of every limit settled.
func settle(x *apply, st settling) {
	domain := view(st.domain)
	p := x.m.plan()
	defer x.m.release(p)
	var recBuf [8]heldRecord
	for range 8 {
		recs := recBuf[:0]
		p.keys = p.keys[:0]
		if st.head {
			if st.headKey != nil {
				p.keys = append(p.keys, st.headKey...)
			} else {
				p.keys = appendReservationKey(p.keys, domain, st.id)
			}
			key := p.keys[:len(p.keys):len(p.keys)]
			// A lease's grant's kind is read with it (grantKind).
			recs = append(recs, heldRecord{key: key, at: slot.Of(key), kind: keyspace.KindReservation, grant: st.headKey != nil})
			if err := x.readPart(&recs[0], 0); err != nil {
				x.Error(err)
				return
			}
		}
		slots := st.slots
		if st.head && slots == nil {
			if !recs[0].live() || st.grant != 0 && grantID(recs[0].state) != st.grant {
				x.w.Null()
				return
			}
			slots = recs[0].state.Slots
		}
		// Room for every part's key: the keys taken before stay where they are.
		p.keys = slices.Grow(p.keys, len(slots)*(partKeyBase+len(domain)+len(st.id)))
		for _, s := range slots {
			if err := x.m.fenceSlot(s); err != nil {
				x.out.Refusal = ErrHeldElsewhere
				x.FailFor(room.ReasonNotNow, string(err.(room.FenceError))+": the reservation is held across groups")
				return
			}
			start := len(p.keys)
			p.keys = appendPartKey(p.keys, domain, st.id, s)
			recs = append(recs, heldRecord{key: p.keys[start:len(p.keys):len(p.keys)], at: s, kind: keyspace.KindReservationPart})
			if err := x.readPart(&recs[len(recs)-1], st.tombstone); err != nil {
				x.Error(err)
				return
			}
		}
		locks := &p.locks
		locks.Reset(x.m.keys)
		for i := range recs {
			r := &recs[i]
			locks.Slots = append(locks.Slots, r.at)
			if !r.live() {
				continue
			}
			if r.kind != keyspace.KindReservationPart {
				// A head written before reservations were split by slot
				// holds limits anywhere.
				if err := x.m.fenceHeld(r.state); err != nil {
					x.Error(err)
					return
				}
			}
			for j := range r.state.Limits {
				locks.Slots = append(locks.Slots, slot.Of(r.state.Limits[j].Key))
			}
		}
		took := x.HoldGroup(locks)
		done := x.settleHeld(recs, st)
		x.ReleaseGroup(locks, took)
		if done {
			return
		}
	}
	x.Error(errors.New("the reservation kept changing while it was settled; try again"))
}

// readPart reads the record r names; with tombstone > 0, a part not held
// is marked cancelled for that long.
func (x *apply) readPart(r *heldRecord, tombstone int64) error {
	s, now := x.LockSlot(r.at)
	defer x.Unlock(s)
	if r.grant {
		r.kind = x.grantKind(s, r.key, now)
	}
	if err := r.read(s, now); err != nil || r.state != nil || tombstone <= 0 {
		return err
	}
	if _, _, err := storeReservation(s, r.key, r.kind, now+tombstone, tombstoneState(), nil, true); err != nil {
		return err
	}
	return r.read(s, now)
}

// settleHeld settles recs with every slot they touch held. It reports
// false when a record is no longer what was read (settled or replaced
// meanwhile): the caller looks again.
func (x *apply) settleHeld(recs []heldRecord, st settling) bool {
	for i := range recs {
		r := &recs[i]
		if s, now := x.LockSlot(r.at); !r.sameAs(s, now) {
			return false
		}
	}
	// A charge beyond the reserve must land: a counter whose key now
	// holds another kind refuses the whole settle, changing nothing (the
	// reservation stays; a cancel still gives back what it can).
	if st.actual > 0 {
		for i := range recs {
			if r := &recs[i]; r.live() {
				for j := range r.state.Limits {
					if l := &r.state.Limits[j]; st.actual > l.Units {
						if err := limiters.Chargeable(x, &l.Charge); err != nil {
							x.Fail("ERR the reservation cannot be charged beyond it: limit " + l.Name + ": " + room.ErrorReply(err))
							return true
						}
					}
				}
			}
		}
	}
	if st.mode == settleReturn {
		for i := range recs {
			if r := &recs[i]; r.live() && r.grant && st.unused > r.state.Reply.Limit {
				x.Fail(fmt.Sprintf("ERR UNUSED %d is more than the lease granted (%d)", st.unused, r.state.Reply.Limit))
				return true
			}
		}
	}
	// The rows leave the apply (room.Outcome.Settled): they are the caller's,
	// never a buffer the next apply writes.
	var rows []room.SettleRow
	held := false
	var failed error
	for i := range recs {
		r := &recs[i]
		if !r.live() {
			continue
		}
		held = true
		s, now := x.LockSlot(r.at)
		if e, ok := s.Get(r.key, now); ok {
			expireAt := s.ExpireAt(e)
			s.Delete(e)
			if st.headKey == nil && st.mode != settleReturn && x.At(1) {
				if err := x.keepSettled(s, r, st, expireAt, now); err != nil {
					x.Error(err)
					return true
				}
			}
		}
		switch {
		case r.kind != keyspace.KindReservation || r.grant:
			// Parts, and leases, are not reservations of their own.
		case st.mode == settleCancel:
			x.m.cancelled.Add(1)
		default:
			x.m.settled.Add(1)
		}
		for j := range r.state.Limits {
			l := &r.state.Limits[j]
			actual := st.actual
			if st.mode == settleReturn {
				actual = max(l.Units-st.unused, 0)
			}
			row := room.SettleRow{Order: l.Order, Name: l.Name, Reserved: l.Units, Actual: actual}
			var err error
			switch {
			case actual < l.Units:
				row.Refunded, err = x.m.limiters.Refund(x, &l.Charge, l.Units-actual, now)
			case actual > l.Units:
				row.Charged, err = x.m.limiters.Force(x, &l.Charge, actual-l.Units, now)
			}
			switch {
			case err != nil && row.Refunded == 0 && actual > l.Units:
				// The charge beyond could not be stored (checked
				// chargeable above: the store itself failed): said, not
				// swallowed.
				failed = errors.Join(failed, fmt.Errorf("limit %s: %w", l.Name, err))
			case err != nil:
				// A refund that cannot be given (its key now holds
				// another kind) gives nothing: never laxer.
				row.Refunded = 0
			}
			rows = append(rows, row)
		}
	}
	if failed != nil {
		x.Fail("ERR the reservation was settled, but a charge beyond it failed: " + room.ErrorReply(failed))
		return true
	}
	if !held {
		x.w.Null()
		return true
	}
	byOrder := func(a, b room.SettleRow) int { return a.Order - b.Order }
	if !slices.IsSortedFunc(rows, byOrder) {
		slices.SortStableFunc(rows, byOrder)
	}
	x.out.Settled, x.out.Held = rows, true
	room.WriteSettle(x.w, rows)
	return true
}

// keepSettled leaves, where a reservation's record r was settled, a
// tombstone until the record would have expired: a late copy of its
// reserve — a part or an RL.RESERVE held by a partition and delivered
// after the settle — finds it and charges nothing, so a settle or cancel
// answered is never undone. A part's is at its key; a head's (the
// reservation's id) at the part key of the domain's own slot, which no
// live part of a head's uses (the head holds that slot's limits), so the
// head's kind keeps counting only reservations held. A lease's grant is
// not marked: its holder asks again under the same id.
func (x *apply) keepSettled(s *keyspace.Slot, r *heldRecord, st settling, expireAt, now int64) error {
	if expireAt <= now {
		return nil
	}
	key := r.key
	var buf [128]byte
	switch r.kind {
	case keyspace.KindReservationPart:
	case keyspace.KindReservation:
		key = appendSettledMark(buf[:0], view(st.domain), st.id, r.at)
		if e, ok := s.Get(key, now); ok {
			s.Delete(e) // a part of the domain's slot, settled with its head
		}
	default:
		return nil
	}
	_, _, err := storeReservation(s, key, keyspace.KindReservationPart, expireAt, tombstoneState(), nil, true)
	return err
}

// tombstoneState is the record of an id that holds nothing and refuses
// a reserve under it: a part cancelled before it came, or an id settled.
func tombstoneState() *ReservationState {
	return &ReservationState{Cancelled: true, Reply: room.CheckResult{Limited: true, Limit: -1, Remaining: -1, RetryAfter: -1}}
}

// appendSettledMark appends where a settled reservation's id is kept
// (keepSettled): the part key of the domain's slot ds.
func appendSettledMark(dst []byte, domain string, id []byte, ds int) []byte {
	return appendPartKey(dst, domain, id, ds)
}
