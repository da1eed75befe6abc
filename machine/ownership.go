package machine

import (
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// SLUICE.OWN, the command that changes which slots this group owns (the
// placement room; the fence every apply checks is the core's, fence.go).

func fenceCommands() []*Command {
	return []*Command{{
		Spec: cmdspec.Spec{Name: "sluice.own", Arity: -2, Flags: []string{"write", "admin"},
			Group: "cluster", Since: "1.3.0", Complexity: "O(R) where R is the number of ranges",
			Summary: "SLUICE.OWN <epoch> <from-to> …: the slots this group owns at the cluster map's epoch (logged by its leader)."}, internal: true, slots: ownershipSlots,
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
		x.Fail(bad)
		return
	}
	next := newOwnership(epoch, ranges)
	if cur := x.m.placement.owned.Load(); cur != nil {
		next.Jobs = cur.Jobs // a map's ownership keeps the group's migrations
		switch {
		case epoch < cur.Epoch:
			x.Fail("ERR stale cluster map: epoch " + strconv.FormatUint(epoch, 10) + ", this group is at epoch " + strconv.FormatUint(cur.Epoch, 10))
			return
		case epoch == cur.Epoch && next.bits != cur.bits:
			x.Fail("ERR cluster map epoch " + strconv.FormatUint(epoch, 10) + " already gave this group other slots")
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
	s, now := x.LockKey(key)
	defer x.Unlock(s)
	if e, ok := s.Get(key, now); ok {
		s.Delete(e)
	}
	if _, err := s.Insert(key, keyspace.KindOwnership, 0, o); err != nil {
		x.Error(err)
		return
	}
	x.m.placement.owned.Store(o)
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
	m.placement.owned.Store(o)
}
