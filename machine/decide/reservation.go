package decide

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"unsafe"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/machine/placement"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/slot"
)

// ReservationState is what RL.RESERVE holds under a reservation id until
// RL.SETTLE or RL.CANCEL (or its ttl): the reserve's reply, and each
// limit it charged with what giving units back, or charging more, needs.
//
// A reservation is held where its counters are, so it moves with them
// when their slots migrate: one record per slot (a part,
// keyspace.KindReservationPart, at a key of that slot) holds the limits
// whose counters are in that slot, and the head (keyspace.KindReservation,
// in the domain's slot, where RL.SETTLE is routed) holds those of the
// domain's own slot and lists the slots of the parts. The parts may be in
// other groups (a reservation across groups); a check's part across groups
// is held as parts without a head. Records are replicated, snapshotted,
// restored and migrated like every other state.
type ReservationState struct {
	// Reply is the reserve's answer, given again to a retried RL.RESERVE.
	Reply room.CheckResult
	// Limits are the limits charged here (Order says where in the
	// reserve's).
	Limits []HeldLimit
	// Slots, in a head, are the slots its parts are held in, ascending.
	Slots []int
	// Args, in a head, identifies the reserve's arguments after its id
	// (ReserveArgsSum; 0: not known): the same id with others is refused.
	// In a lease's grant it is the grant's id (grantID; 0: made below
	// level 1).
	Args uint64
	// Cancelled marks a tombstone: a check's part cancelled before its
	// reserve applied (RL.PART CANCEL … <ttl> found nothing held). A
	// reserve of the id that arrives later finds it, is refused and
	// charges nothing, so a cancel confirmed is never undone by a reserve
	// still in flight. It holds no limits; settling it gives nothing.
	Cancelled bool
}

// The first byte of a reservation's encoding: its reply's limited flag,
// whether it is a tombstone, and whether the slots and orders follow
// (records written before reservations were split by slot have neither).
const (
	limitedFlag   = 1
	tombstoneFlag = 2
	slotsFlag     = 4
	knownFlags    = limitedFlag | tombstoneFlag | slotsFlag
)

// HeldLimit is one limit of a reservation.
type HeldLimit struct {
	// Charge is the counter's key and algorithm, the units the reserve
	// charged it and where.
	limiters.Charge
	// Name is what the settle reply calls the limit (the rule's id).
	Name string
	// Order is the limit's place in the reserve (the settle's reply lists
	// the limits in it, whichever record holds them).
	Order int
}

// maxReservationID bounds a reservation id, in bytes.
const maxReservationID = 256

// errCorruptReservation: a reservation record does not decode.
var errCorruptReservation = errors.New("machine: corrupt reservation record")

// AppendBinary appends the reservation's encoding (snapshots, digests).
func (r *ReservationState) AppendBinary(dst []byte) []byte {
	rep := &r.Reply
	flag := byte(slotsFlag)
	switch {
	case r.Cancelled:
		flag |= tombstoneFlag
	case rep.Limited:
		flag |= limitedFlag
	}
	dst = append(dst, flag)
	for _, v := range [...]int64{rep.Limit, rep.Remaining, rep.RetryAfter, rep.ResetAfter, rep.Window} {
		dst = binary.AppendVarint(dst, v)
	}
	dst = appendBytes(dst, rep.Name)
	dst = binary.AppendUvarint(dst, uint64(len(r.Limits)))
	for i := range r.Limits {
		l := &r.Limits[i]
		dst = binary.AppendUvarint(dst, uint64(len(l.Key)))
		dst = append(dst, l.Key...)
		dst = append(dst, byte(l.Kind))
		dst = appendBytes(dst, l.Name)
		for _, v := range [...]int64{l.Units, l.Anchor, l.Step, l.Limit} {
			dst = binary.AppendVarint(dst, v)
		}
		dst = binary.AppendUvarint(dst, uint64(l.Order))
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Slots)))
	for _, s := range r.Slots {
		dst = binary.AppendUvarint(dst, uint64(s))
	}
	return binary.AppendUvarint(dst, r.Args)
}

func appendBytes(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func decodeReservation(b []byte) (*ReservationState, error) { return decodeReservationIn(b, false) }

// decodeReservationIn decodes b; with alias the keys and names are views
// of b (which the caller keeps, unchanged), not copies.
func decodeReservationIn(b []byte, alias bool) (*ReservationState, error) {
	str := func(v []byte) string {
		if alias && len(v) > 0 {
			return unsafe.String(&v[0], len(v))
		}
		return string(v)
	}
	if len(b) == 0 || b[0]&^knownFlags != 0 {
		return nil, errCorruptReservation
	}
	flag := b[0]
	d := room.Reader{B: b[1:]}
	r := &ReservationState{}
	rep := &r.Reply
	r.Cancelled = flag&tombstoneFlag != 0
	rep.Limited = flag&limitedFlag != 0 || r.Cancelled
	for _, p := range []*int64{&rep.Limit, &rep.Remaining, &rep.RetryAfter, &rep.ResetAfter, &rep.Window} {
		*p = d.Varint()
	}
	rep.Name = str(d.Bytes())
	n := d.Uvarint(maxLimits)
	if n > 0 && !d.Bad {
		r.Limits = make([]HeldLimit, 0, min(n, len(d.B)))
	}
	for range n {
		if d.Bad {
			break
		}
		l := HeldLimit{Charge: limiters.Charge{Key: d.Bytes()}}
		if !alias {
			l.Key = append([]byte(nil), l.Key...)
		}
		if len(d.B) == 0 {
			d.Bad = true
			break
		}
		l.Kind, d.B = keyspace.Kind(d.B[0]), d.B[1:]
		l.Name = str(d.Bytes())
		for _, p := range []*int64{&l.Units, &l.Anchor, &l.Step, &l.Limit} {
			*p = d.Varint()
		}
		l.Order = len(r.Limits)
		if flag&slotsFlag != 0 {
			l.Order = d.Uvarint(maxLimits)
		}
		if !refundable(l.Kind) || l.Units < 0 || l.Step < 0 {
			d.Bad = true
		}
		r.Limits = append(r.Limits, l)
	}
	if flag&slotsFlag != 0 && !d.Bad {
		n := d.Uvarint(slot.Count)
		if n > 0 && !d.Bad {
			r.Slots = make([]int, 0, min(n, len(d.B)))
		}
		for range n {
			s := d.Uvarint(slot.Count - 1)
			if d.Bad || len(r.Slots) > 0 && s <= r.Slots[len(r.Slots)-1] {
				d.Bad = true
				break
			}
			r.Slots = append(r.Slots, s)
		}
		r.Args = d.Uvarint64()
	}
	if d.Bad || len(d.B) != 0 || r.Cancelled && len(r.Limits) > 0 {
		return nil, errCorruptReservation
	}
	return r, nil
}

// Bytes is the memory the reservation holds, roughly.
func (r *ReservationState) Bytes() int {
	n := 96 + len(r.Reply.Name) + 8*len(r.Slots)
	for i := range r.Limits {
		n += 80 + len(r.Limits[i].Key) + len(r.Limits[i].Name)
	}
	return n
}

// refundable reports the kinds a reservation can hold: every limiter of
// RL.CHECK but leases (a release is their refund).
func refundable(k keyspace.Kind) bool {
	switch k {
	case keyspace.KindGCRA, keyspace.KindSlidingCounter, keyspace.KindSlidingLog, keyspace.KindFixedWindow, keyspace.KindQuota:
		return true
	}
	return false
}

// appendPartKey appends where the part of a domain's reservation id held
// in slot s is kept: a key of that slot (its hash tag is slot.Tag(s)),
// which no counter or domain record shares ("rl-res:" is no "rl:").
func appendPartKey(dst []byte, domain string, id []byte, s int) []byte {
	tag := slot.Tag(s)
	dst = append(dst, "rl-res:{"...)
	dst = append(dst, tag[:]...)
	dst = append(dst, '}')
	dst = strconv.AppendInt(dst, int64(len(domain)), 10)
	dst = append(dst, ':')
	dst = append(dst, domain...)
	dst = append(dst, '/')
	return append(dst, id...)
}

// HeldSlots are the slots of the parts of the reservation id of domain,
// as its head says at the applied instant (a coordinator routes a settle
// by them); ok is false when no head is held here.
func (m *Room) HeldSlots(domain string, id []byte) (slots []int, ok bool) {
	key := appendReservationKey(nil, domain, id)
	s := m.keys.Lock(slot.Of(key))
	defer s.Unlock()
	r, err := reservationAt(s, key, keyspace.KindReservation, m.core.Applied())
	if err != nil || r == nil || r.Cancelled {
		return nil, false
	}
	return slices.Clone(r.Slots), true
}

// storeReservation keeps r at key of s until expireAt: with inline, as
// its encoding in the record (off the Go heap) when it fits one, which
// every reservation of a few limits does; else as a copy (r may be
// scratch). Inline costs an encoding and a decoding, and saves the most
// where a reservation is several records (a sharded cluster's). buf is
// scratch for the encoding, returned grown; obj is the copy kept, if one
// was.
func storeReservation(s *keyspace.Slot, key []byte, kind keyspace.Kind, expireAt int64, r *ReservationState, buf []byte, inline bool) (_ []byte, obj *ReservationState, err error) {
	if inline {
		buf = r.AppendBinary(buf[:0])
		if len(buf) <= keyspace.MaxInlineState {
			_, err := s.InsertState(key, kind, expireAt, buf)
			return buf, nil, err
		}
	}
	obj = r.clone()
	_, err = s.Insert(key, kind, expireAt, obj)
	return buf, obj, err
}

// clone is a deep copy of r: its limits' keys share one array.
func (r *ReservationState) clone() *ReservationState {
	c := *r
	c.Slots = slices.Clone(r.Slots)
	c.Limits = slices.Clone(r.Limits)
	n := 0
	for i := range c.Limits {
		n += len(c.Limits[i].Key)
	}
	keys := make([]byte, 0, n)
	for i := range c.Limits {
		start := len(keys)
		keys = append(keys, c.Limits[i].Key...)
		c.Limits[i].Key = keys[start:len(keys):len(keys)]
	}
	return &c
}

// reservationAt is the reservation record of kind at key (nil if none),
// decoded (its keys copied out of the record).
func reservationAt(s *keyspace.Slot, key []byte, kind keyspace.Kind, now int64) (*ReservationState, error) {
	r, _, err := reservationSeen(s, key, kind, now, false)
	return r, err
}

// reservationSeen is reservationAt that also returns what identifies the
// state as read: a copy of its encoding when it is in the record (then,
// with alias, the limits' keys are slices of that copy), else the object.
func reservationSeen(s *keyspace.Slot, key []byte, kind keyspace.Kind, now int64, alias bool) (*ReservationState, any, error) {
	e, found, err := s.GetKind(key, kind, now)
	if err != nil || !found {
		return nil, nil, err
	}
	if e.Inline() {
		enc := bytes.Clone(s.State(e)) // the record's bytes move with the slot
		r, err := decodeReservationIn(enc, alias)
		return r, enc, err
	}
	if r, ok := s.Object(e).(*ReservationState); ok && r != nil {
		return r, r, nil
	}
	return nil, nil, errCorruptReservation
}

// sameReservation reports whether the record of kind at key still holds
// what reservationSeen saw as seen.
func sameReservation(s *keyspace.Slot, key []byte, kind keyspace.Kind, now int64, seen any) bool {
	e, found, err := s.GetKind(key, kind, now)
	switch {
	case err != nil || !found:
		return seen == nil
	case e.Inline():
		was, ok := seen.([]byte)
		return ok && bytes.Equal(s.State(e), was)
	}
	return s.Object(e) == seen
}

// ReserveArgsSum identifies an RL.RESERVE's arguments after its id (its
// ttl, cost and descriptors): FNV-1a over each word and its length, never
// 0.
func ReserveArgsSum(words [][]byte) uint64 {
	h := uint64(14695981039346656037)
	add := func(b byte) { h = (h ^ uint64(b)) * 1099511628211 }
	var n [binary.MaxVarintLen64]byte
	for _, w := range words {
		for _, b := range binary.AppendUvarint(n[:0], uint64(len(w))) {
			add(b)
		}
		for _, b := range w {
			add(b)
		}
	}
	return max(h, 1)
}

// HeldReserve is the head of the reservation id of domain at the applied
// instant, when one is held here: its reply and its arguments' sum (a
// coordinator answers a retried reserve from it).
func (m *Room) HeldReserve(domain string, id []byte) (reply room.CheckResult, args uint64, ok bool) {
	key := appendReservationKey(nil, domain, id)
	s := m.keys.Lock(slot.Of(key))
	defer s.Unlock()
	r, err := reservationAt(s, key, keyspace.KindReservation, m.core.Applied())
	if err != nil || r == nil || r.Cancelled {
		return room.CheckResult{}, 0, false
	}
	return r.Reply, r.Args, true
}

// spansGroups is the reply to a held reservation with a counter in slot s,
// which another group owns, when the reservation is one record (made
// before the group fenced by a map): such a record does not move with its
// counters, so asking again does not help. (A sharded group's
// reservations are a part per counter's slot, which moves with it.)
func spansGroups(s int, o *placement.Ownership) string {
	return "CROSSSLOT the check's counters are not all in this group's slots (slot " + strconv.Itoa(s) +
		", cluster map epoch " + strconv.FormatUint(o.Epoch, 10) + ")"
}

// fenceHeld is fenceChecks for a reservation's counters.
func (m *Room) fenceHeld(r *ReservationState) error {
	for i := range r.Limits {
		if s, o, ok := m.unowned(r.Limits[i].Key); ok {
			return room.FenceError(spansGroups(s, o))
		}
	}
	return nil
}
