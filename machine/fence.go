package machine

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/slot"
)

// Fencing. In a sharded cluster (package shardmap) each group's state
// machine knows the slots it owns, at the cluster map's epoch, as
// replicated state: the internal command SLUICE.OWN <epoch> <from-to> …,
// logged by the group's leader, sets it, and from then on every apply
// refuses a command for a slot the group does not own — deterministically,
// inside the apply, so no stale client or router can make two groups
// decide for one slot. A map of an older epoch is refused, so ownership
// never goes back. A machine never told owns every slot (one group: a
// single node, or --peers).

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
var errCorruptOwnership = errors.New("machine: corrupt slot ownership record")

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

// OwnsSlot reports whether this group's log gives it slot s (false before
// any map: a router asks it only in a sharded cluster).
func (m *Machine) OwnsSlot(s int) bool {
	o := m.placement.owned.Load()
	return o != nil && o.Owns(s)
}

// Owned is the slots this group owns (nil: every slot).
func (m *Machine) Owned() *Ownership { return m.placement.owned.Load() }

// notOwned is the reply to a command for slot s this group does not own.
func notOwned(s int, o *Ownership) string {
	return "TRYAGAIN slot " + strconv.Itoa(s) + " is not this group's (cluster map epoch " + strconv.FormatUint(o.Epoch, 10) + ")"
}

// fence is the reply that refuses cmd for a slot this group does not own,
// or "": the slots its declaration names. A command that may touch any
// slot is fenced where it locks its counters (lockPlan, a settle's group);
// a domain's records (rules, overrides, scale, reservations) are
// configuration every group keeps, never fenced.
func (m *Machine) fence(cmd *Command, args [][]byte) string {
	o := m.placement.owned.Load()
	if o == nil || cmd.internal || cmd.everyGroup {
		return ""
	}
	var buf [16]int
	slots, all := cmd.Slots(buf[:0], args)
	if all {
		return ""
	}
	for _, s := range slots {
		if !o.Owns(s) {
			return notOwned(s, o)
		}
	}
	return ""
}

// fenceError is a refusal for a slot this group does not own; its text is
// the whole error reply.
type fenceError string

func (e fenceError) Error() string { return string(e) }

// WholeReply is its text: the whole reply (room.WholeReply).
func (e fenceError) WholeReply() string { return string(e) }

// unowned is the slot of key when this group does not own it, with the
// ownership that says so (ok false: owned, or no map fences this group).
func (m *Machine) unowned(key []byte) (s int, o *Ownership, ok bool) {
	o = m.placement.owned.Load()
	if o == nil {
		return 0, nil, false
	}
	if s = slot.Of(key); o.Owns(s) {
		return 0, nil, false
	}
	return s, o, true
}
