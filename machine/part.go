package machine

import (
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// A check across the groups of a sharded cluster is split by group (the
// coordinator, package crossgroup): each group is sent the descriptors
// whose counters it owns as a part — RL.PART RESERVE, then RL.PART SETTLE
// when every part admitted, or RL.PART CANCEL of the admitted ones when
// one refused (the exact refunds of reservations). A part is RL.RESERVE,
// RL.SETTLE or RL.CANCEL without a key, so the group it is sent to applies
// it instead of redirecting by the domain's slot; its fence still refuses
// counters the group does not own.

func partCommands() []*Command {
	return []*Command{{
		Name: "rl.part", slots: allSlots, Arity: -4, Flags: []string{"write", "denyoom"},
		Group: "sluice", Since: "1.3.0", Complexity: "O(D) where D is the number of descriptor entries",
		Summary:     "RESERVE|SETTLE|CANCEL <domain> <id> …: a group's part of a check across groups (RL.RESERVE, RL.SETTLE, RL.CANCEL without a key, sent by the coordinator).",
		subcommands: []string{"reserve", "settle", "cancel", "apply"},
		Args: []Arg{
			{Name: "subcommand", Type: "oneof", Sub: []Arg{
				{Name: "reserve", Type: "pure-token", Token: "RESERVE"},
				{Name: "settle", Type: "pure-token", Token: "SETTLE"},
				{Name: "cancel", Type: "pure-token", Token: "CANCEL"},
				{Name: "apply", Type: "pure-token", Token: "APPLY"},
			}},
			{Name: "domain", Type: "string"}, {Name: "reservation-id", Type: "string"},
			{Name: "arg", Type: "string", Optional: true, Multiple: true},
		},
		run: func(x *exec, args [][]byte) {
			switch {
			case resp.EqualFold(args[1], "reserve"):
				runReserve(x, args[1:])
			case resp.EqualFold(args[1], "settle") && len(args) == 5, resp.EqualFold(args[1], "cancel") && len(args) == 4:
				runSettle(x, args[1:])
			case resp.EqualFold(args[1], "apply"):
				// Configuration another group applied, for this one too.
				if cmd := x.m.Lookup(args[2]); cmd != nil && cmd.everyGroup && cmd.ArityOK(len(args)-2) {
					cmd.run(x, args[2:])
					return
				}
				x.fail(partSyntax)
			default:
				x.fail(partSyntax)
			}
		},
		check: func(m *Machine, args [][]byte) string {
			switch {
			case resp.EqualFold(args[1], "reserve"):
				if len(args) < 8 {
					return partSyntax
				}
				return checkReserve(m, args[1:])
			case resp.EqualFold(args[1], "settle") && len(args) == 5, resp.EqualFold(args[1], "cancel") && len(args) == 4:
				return checkSettle(m, args[1:])
			case resp.EqualFold(args[1], "apply"):
				if cmd := m.Lookup(args[2]); cmd != nil && cmd.everyGroup && cmd.ArityOK(len(args)-2) {
					return cmd.Check(m, args[2:])
				}
			}
			return partSyntax
		},
	}}
}

const partSyntax = "ERR syntax error: RL.PART RESERVE <domain> <id> <ttl> [COST <n>] DESCRIPTOR … | SETTLE <domain> <id> <actual> | CANCEL <domain> <id> | APPLY <RL.RULES|RL.OVERRIDE|RL.SCALE …>"

// DescriptorSlots plans an RL.CHECK without applying it: for each of its
// descriptors, the slot of the counter its rule charges, or -1 when no
// limit applies to it (no rule, an unlimited one, or an unknown domain).
// The coordinator splits a check by the groups that own these slots. bad
// is the error reply of a malformed check.
func (m *Machine) DescriptorSlots(args [][]byte) (slots []int, bad string) {
	p := m.plan()
	defer m.release(p)
	if bad := parseDescriptors(args[2:], p); bad != "" {
		return nil, bad
	}
	slots = make([]int, len(p.bounds))
	for i := range slots {
		slots[i] = -1
	}
	d := m.rules().Domain(view(args[1]))
	if d == nil {
		return slots, ""
	}
	p.forDomain(view(args[1]), false)
	p.addMatched(d)
	k := 0 // the planned checks are the limiting descriptors', in order
	for i, r := range p.matched {
		if limits(r) {
			slots[i] = slot.Of(p.span(p.spans[k].counter))
			k++
		}
	}
	return slots, ""
}
