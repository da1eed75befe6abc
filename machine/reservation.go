package machine

import (
	"encoding/binary"
	"errors"

	"github.com/sluice-rl/sluice/keyspace"
)

// ReservationState is what RL.RESERVE holds under a reservation id until
// RL.SETTLE or RL.CANCEL (or its ttl): the reserve's reply, and each
// limit it charged with what giving units back, or charging more, needs.
// It is a record of the domain's slot (keyspace.KindReservation), so it
// is replicated, snapshotted and restored like every other state.
type ReservationState struct {
	// Reply is the reserve's answer, given again to a retried RL.RESERVE.
	Reply CheckResult
	// Limits are the limits charged, in the reserve's order.
	Limits []HeldLimit
	// Cancelled marks a tombstone: a check's part cancelled before its
	// reserve applied (RL.PART CANCEL … <ttl> found nothing held). A
	// reserve of the id that arrives later finds it, is refused and
	// charges nothing, so a cancel confirmed is never undone by a reserve
	// still in flight. It holds no limits; settling it gives nothing.
	Cancelled bool
}

// tombstoneFlag is the first byte of a tombstone's encoding (a reply's
// limited flag is 0 or 1).
const tombstoneFlag = 2

// HeldLimit is one limit of a reservation.
type HeldLimit struct {
	// Key is the counter's key (the reservation's keys share one array),
	// Kind its algorithm, Name what the settle reply calls it (the rule's
	// id).
	Key  []byte
	Kind keyspace.Kind
	Name string
	// Units is what the reserve charged the counter.
	Units int64
	// Anchor is where the charge went: GCRA, the TAT it started from
	// (gcra.Refund's base); the window kinds, the (sub-)window's start, or
	// for a sliding log the entry's instant; quota, the period's start.
	Anchor int64
	// Step is GCRA's emission interval, or the window's length; Limit the
	// window's limit (a charge beyond the reserve is counted under them).
	Step, Limit int64
}

// maxReservationID bounds a reservation id, in bytes.
const maxReservationID = 256

// errCorruptReservation: a reservation record does not decode.
var errCorruptReservation = errors.New("machine: corrupt reservation record")

// AppendBinary appends the reservation's encoding (snapshots, digests).
func (r *ReservationState) AppendBinary(dst []byte) []byte {
	rep := &r.Reply
	flag := byte(replyFlag(rep.Limited))
	if r.Cancelled {
		flag = tombstoneFlag
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
	}
	return dst
}

func appendBytes(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func decodeReservation(b []byte) (*ReservationState, error) {
	if len(b) == 0 || b[0] > tombstoneFlag {
		return nil, errCorruptReservation
	}
	d := byteReader{b: b[1:]}
	r := &ReservationState{}
	rep := &r.Reply
	rep.Limited = b[0] != 0
	r.Cancelled = b[0] == tombstoneFlag
	for _, p := range []*int64{&rep.Limit, &rep.Remaining, &rep.RetryAfter, &rep.ResetAfter, &rep.Window} {
		*p = d.varint()
	}
	rep.Name = string(d.bytes())
	n := d.uvarint(maxLimits)
	for range n {
		if d.bad {
			break
		}
		l := HeldLimit{Key: append([]byte(nil), d.bytes()...)}
		if len(d.b) == 0 {
			d.bad = true
			break
		}
		l.Kind, d.b = keyspace.Kind(d.b[0]), d.b[1:]
		l.Name = string(d.bytes())
		for _, p := range []*int64{&l.Units, &l.Anchor, &l.Step, &l.Limit} {
			*p = d.varint()
		}
		if !refundable(l.Kind) || l.Units < 0 || l.Step < 0 {
			d.bad = true
		}
		r.Limits = append(r.Limits, l)
	}
	if d.bad || len(d.b) != 0 || r.Cancelled && len(r.Limits) > 0 {
		return nil, errCorruptReservation
	}
	return r, nil
}

// Bytes is the memory the reservation holds, roughly.
func (r *ReservationState) Bytes() int {
	n := 96 + len(r.Reply.Name)
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
