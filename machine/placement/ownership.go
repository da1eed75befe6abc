package placement

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// SLUICE.OWN, the command that changes which slots this group owns (the
// fence every apply checks is package machine's, fence.go).

// OwnershipKey holds the slots this group owns (kind ownership).
const OwnershipKey = "sluice:slots"

// Ownership is the slots a group owns at an epoch.
type Ownership struct {
	// Epoch is the cluster map's.
	Epoch uint64
	// Ranges are the owned slots, From to To included, as logged.
	Ranges [][2]int
	// Jobs are the group's slot migrations (slotjobs.go).
	Jobs []Job
	// bits has slot s's bit set when it is owned.
	bits slotBits
}

// SlotRanges are the owned slots as sorted, merged ranges (Ranges are as
// logged: a map may list adjacent ranges apart).
func (o *Ownership) SlotRanges() [][2]int { return o.bits.ranges() }

// Owns reports whether slot s is owned.
func (o *Ownership) Owns(s int) bool { return o.bits[s/64]&(1<<(s%64)) != 0 }

// errCorruptOwnership: an ownership record does not decode.
var errCorruptOwnership = errors.New("placement: corrupt slot ownership record")

// newOwnership builds the ownership of ranges at epoch.
func newOwnership(epoch uint64, ranges [][2]int) *Ownership {
	return &Ownership{Epoch: epoch, Ranges: ranges, bits: bitsOf(ranges)}
}

// AppendBinary appends the ownership's encoding (snapshots, digests).
func (o *Ownership) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, o.Epoch)
	dst = binary.AppendUvarint(dst, uint64(len(o.Ranges)))
	for _, r := range o.Ranges {
		dst = binary.AppendUvarint(dst, uint64(r[0]))
		dst = binary.AppendUvarint(dst, uint64(r[1]))
	}
	if len(o.Jobs) > 0 {
		dst = appendJobs(dst, o.Jobs)
	}
	return dst
}

func decodeOwnership(b []byte) (*Ownership, error) {
	d := room.Reader{B: b}
	epoch, n := binary.Uvarint(d.B)
	if n <= 0 {
		return nil, errCorruptOwnership
	}
	d.B = d.B[n:]
	count := d.Uvarint(slot.Count)
	ranges := make([][2]int, 0, count)
	for range count {
		from, to := d.Uvarint(slot.Count-1), d.Uvarint(slot.Count-1)
		if d.Bad || from > to {
			return nil, errCorruptOwnership
		}
		ranges = append(ranges, [2]int{from, to})
	}
	var jobs []Job
	if !d.Bad && len(d.B) != 0 {
		jobs = decodeJobs(&d) // records written before migrations have none
	}
	if d.Bad || len(d.B) != 0 {
		return nil, errCorruptOwnership
	}
	o := newOwnership(epoch, ranges)
	o.Jobs = jobs
	return o, nil
}

func (r *Room) ownCommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "sluice.own", Arity: -2, Flags: []string{"write", "admin"},
			Group: "cluster", Since: "1.3.0", Complexity: "O(R) where R is the number of ranges",
			Summary: "SLUICE.OWN <epoch> <from-to> …: the slots this group owns at the cluster map's epoch (logged by its leader)."}, Internal: true, Slots: ownershipSlots,
		Run: r.runOwn, Check: func(args [][]byte) string {
			_, _, bad := parseOwn(args)
			return bad
		},
	}}
}

func ownershipSlots([][]byte) ([]int, bool) {
	return []int{slot.Of([]byte(OwnershipKey))}, false
}

// parseOwn reads SLUICE.OWN's epoch and ranges.
func parseOwn(args [][]byte) (uint64, [][2]int, string) {
	epoch, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil || epoch == 0 {
		return 0, nil, "ERR the epoch must be a positive integer"
	}
	var ranges [][2]int
	for _, a := range args[2:] {
		from, to, ok := slot.ParseRange(string(a))
		if !ok {
			return 0, nil, "ERR slot range '" + resp.Clip(a, 32) + "' is not <from>-<to> in 0-16383"
		}
		ranges = append(ranges, [2]int{from, to})
	}
	return epoch, ranges, ""
}

// runOwn is SLUICE.OWN: a later epoch replaces the ownership, the same
// epoch again is a no-op when it names the same slots, an older one is
// refused.
func (r *Room) runOwn(x Exec, args [][]byte) {
	epoch, ranges, bad := parseOwn(args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	next := newOwnership(epoch, ranges)
	if cur := r.owned.Load(); cur != nil {
		next.Jobs = cur.Jobs // a map's ownership keeps the group's migrations
		switch {
		case epoch < cur.Epoch:
			x.Fail("ERR stale cluster map: epoch " + strconv.FormatUint(epoch, 10) + ", this group is at epoch " + strconv.FormatUint(cur.Epoch, 10))
			return
		case epoch == cur.Epoch && next.bits != cur.bits:
			x.Fail("ERR cluster map epoch " + strconv.FormatUint(epoch, 10) + " already gave this group other slots")
			return
		case epoch == cur.Epoch:
			x.Reply().OK()
			return
		}
	}
	r.setOwnership(x, next)
	x.Reply().OK()
}

// setOwnership stores o under OwnershipKey and makes it the one applies
// fence by.
func (r *Room) setOwnership(x Exec, o *Ownership) {
	key := []byte(OwnershipKey)
	s, now := x.LockKey(key)
	defer x.Unlock(s)
	if e, ok := s.Get(key, now); ok {
		s.Delete(e)
	}
	if _, err := s.Insert(key, keyspace.KindOwnership, 0, o); err != nil {
		x.Error(err)
		return
	}
	r.owned.Store(o)
}

// reloadOwnership points owned at what OwnershipKey holds (after a
// restore).
func (r *Room) reloadOwnership() {
	key := []byte(OwnershipKey)
	s := r.core.Store().LockKey(key)
	defer s.Unlock()
	var o *Ownership
	if e, ok := s.Get(key, r.core.Applied()); ok && e.Kind() == keyspace.KindOwnership {
		o, _ = s.Object(e).(*Ownership)
	}
	r.owned.Store(o)
}

// NotOwned is the reply to a command for slot s, which o does not own.
func (o *Ownership) NotOwned(s int) string {
	return "TRYAGAIN slot " + strconv.Itoa(s) + " is not this group's (cluster map epoch " + strconv.FormatUint(o.Epoch, 10) + ")"
}
