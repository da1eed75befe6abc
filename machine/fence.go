package machine

// Fencing. In a sharded cluster (package shardmap) each group's state
// machine knows the slots it owns, at the cluster map's epoch, as
// replicated state: the internal command SLUICE.OWN <epoch> <from-to> …,
// logged by the group's leader, sets it, and from then on every apply
// refuses a command for a slot the group does not own — deterministically,
// inside the apply, so no stale client or router can make two groups
// decide for one slot. A map of an older epoch is refused, so ownership
// never goes back. A machine never told owns every slot (one group: a
// single node, or --peers).

// fence is the reply that refuses cmd for a slot this group does not own,
// or "": the slots its declaration names. A command that may touch any
// slot is fenced where it locks its counters (lockPlan, a settle's group);
// a domain's records (rules, overrides, scale, reservations) are
// configuration every group keeps, never fenced.
func (m *Machine) fence(cmd *Command, args [][]byte) string {
	o := m.placement.Owned()
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
			return o.NotOwned(s)
		}
	}
	return ""
}
