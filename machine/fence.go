package machine

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/resp"
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
	d := byteReader{b: b}
	epoch, n := binary.Uvarint(d.b)
	if n <= 0 {
		return nil, errCorruptOwnership
	}
	d.b = d.b[n:]
	count := d.uvarint(slot.Count)
	ranges := make([][2]int, 0, count)
	for range count {
		from, to := d.uvarint(slot.Count-1), d.uvarint(slot.Count-1)
		if d.bad || from > to {
			return nil, errCorruptOwnership
		}
		ranges = append(ranges, [2]int{from, to})
	}
	var jobs []Job
	if !d.bad && len(d.b) != 0 {
		jobs = decodeJobs(&d) // records written before migrations have none
	}
	if d.bad || len(d.b) != 0 {
		return nil, errCorruptOwnership
	}
	o := newOwnership(epoch, ranges)
	o.Jobs = jobs
	return o, nil
}

// OwnsSlot reports whether this group's log gives it slot s (false before
// any map: a router asks it only in a sharded cluster).
func (m *Machine) OwnsSlot(s int) bool {
	o := m.owned.Load()
	return o != nil && o.Owns(s)
}

// Owned is the slots this group owns (nil: every slot).
func (m *Machine) Owned() *Ownership { return m.owned.Load() }

func fenceCommands() []*Command {
	return []*Command{{
		Name: "sluice.own", Arity: -2, Flags: []string{"write", "admin"},
		Group: "cluster", Since: "1.3.0", Complexity: "O(R) where R is the number of ranges",
		Summary:  "SLUICE.OWN <epoch> <from-to> …: the slots this group owns at the cluster map's epoch (logged by its leader).",
		internal: true, slots: ownershipSlots,
		run: runOwn, check: func(_ *Machine, args [][]byte) string {
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
func runOwn(x *exec, args [][]byte) {
	epoch, ranges, bad := parseOwn(args)
	if bad != "" {
		x.fail(bad)
		return
	}
	next := newOwnership(epoch, ranges)
	if cur := x.m.owned.Load(); cur != nil {
		next.Jobs = cur.Jobs // a map's ownership keeps the group's migrations
		switch {
		case epoch < cur.Epoch:
			x.fail("ERR stale cluster map: epoch " + strconv.FormatUint(epoch, 10) + ", this group is at epoch " + strconv.FormatUint(cur.Epoch, 10))
			return
		case epoch == cur.Epoch && next.bits != cur.bits:
			x.fail("ERR cluster map epoch " + strconv.FormatUint(epoch, 10) + " already gave this group other slots")
			return
		case epoch == cur.Epoch:
			x.w.OK()
			return
		}
	}
	x.setOwnership(next)
	x.w.OK()
}

// setOwnership stores o under OwnershipKey and makes it the one applies
// fence by.
func (x *exec) setOwnership(o *Ownership) {
	key := []byte(OwnershipKey)
	s, now := x.lockKey(key)
	defer x.unlock(s)
	if e, ok := s.Get(key, now); ok {
		s.Delete(e)
	}
	if _, err := s.Insert(key, keyspace.KindOwnership, 0, o); err != nil {
		x.error(err)
		return
	}
	x.m.owned.Store(o)
}

// reloadOwnership points owned at what OwnershipKey holds (after a
// restore).
func (m *Machine) reloadOwnership() {
	key := []byte(OwnershipKey)
	s := m.keys.LockKey(key)
	defer s.Unlock()
	var o *Ownership
	if e, ok := s.Get(key, m.applied.Load()); ok && e.Kind() == keyspace.KindOwnership {
		o, _ = s.Object(e).(*Ownership)
	}
	m.owned.Store(o)
}

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
	o := m.owned.Load()
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

// fenceChecks refuses a multi-limit check whose counters sit in a slot
// this group does not own (nil: all owned). Such a check reached the log
// because the member that routed it had not yet heard that the slot moved
// (a check whose counters it knew to be elsewhere it splits across the
// groups): nothing is charged, and asked again it goes where the counters
// are now — TRYAGAIN, which cluster clients retry, where CROSSSLOT would
// tell them the request can never succeed.
func (m *Machine) fenceChecks(checks []limitCheck) error {
	o := m.owned.Load()
	if o == nil {
		return nil
	}
	for i := range checks {
		if s := slot.Of(checks[i].key); !o.Owns(s) {
			return fenceError(countersMoved(s, o))
		}
	}
	return nil
}

// countersMoved is the reply to a check with a counter in slot s, which
// another group owns now.
func countersMoved(s int, o *Ownership) string {
	return "TRYAGAIN the check's counters are not all in this group's slots (slot " + strconv.Itoa(s) +
		", cluster map epoch " + strconv.FormatUint(o.Epoch, 10) + "): asked again, it goes where they are now"
}

// spansGroups is the reply to a held reservation with a counter in slot s,
// which another group owns, when the reservation is one record (made
// before the group fenced by a map): such a record does not move with its
// counters, so asking again does not help. (A sharded group's
// reservations are a part per counter's slot, which moves with it.)
func spansGroups(s int, o *Ownership) string {
	return "CROSSSLOT the check's counters are not all in this group's slots (slot " + strconv.Itoa(s) +
		", cluster map epoch " + strconv.FormatUint(o.Epoch, 10) + ")"
}

// fenceHeld is fenceChecks for a reservation's counters.
func (m *Machine) fenceHeld(r *ReservationState) error {
	o := m.owned.Load()
	if o == nil {
		return nil
	}
	for i := range r.Limits {
		if s := slot.Of(r.Limits[i].Key); !o.Owns(s) {
			return fenceError(spansGroups(s, o))
		}
	}
	return nil
}
