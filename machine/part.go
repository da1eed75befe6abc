package machine

import (
	"slices"

	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// A check across the groups of a sharded cluster is split by group (the
// coordinator, package crossgroup): each group is sent the descriptors
// whose counters it owns as a part, and the check is admitted only when
// every part is.
//
//	RL.PART RESERVE <rules> <id> <ttl> <RL.CHECK|RL.SHOULDRATELIMIT> <domain> …
//	RL.PART CANCEL <domain> <id> [<ttl>]   a part refused: give them back
//	RL.PART DECIDE <rules> <RL.CHECK|RL.SHOULDRATELIMIT> <domain> …
//	RL.PART APPLY <RL.RULES|RL.OVERRIDE|RL.SCALE …>
//	RL.PART DIGEST [<domain>]
//
// RESERVE decides the command as its group's share and holds what it
// charged as a reservation (RL.RESERVE's), so CANCEL gives it back with
// the exact, never-lax refunds of reservations. A CANCEL with a ttl that
// finds nothing held leaves a tombstone for that long: the reserve may
// still be on its way (its answer was lost), and when it arrives it is
// refused and charges nothing — so a cancel confirmed stays true. When every part admitted
// the reservation is left to expire, which keeps the charge;
// DECIDE is a check whose counters all sit in one group, decided once.
// A part has no key, so the group it is sent to applies it instead of
// redirecting by the domain's slot; its fence still refuses counters the
// group does not own. Every deciding part carries the digest of the
// domain's rules at its coordinator (RulesDigest): a group whose rules
// differ refuses it, naming both, rather than decide by other rules.
// APPLY is configuration another group applied, for this one too; DIGEST
// is RulesDigest (RL.RULES LIST compares the groups').

func partCommands() []*Command {
	return []*Command{{
		Name: "rl.part", slots: allSlots, Arity: -2, Flags: []string{"write", "denyoom"}, fromMember: true,
		Group: "sluice", Since: "1.3.0", Complexity: "O(D) where D is the number of descriptor entries",
		Summary:     "RESERVE|CANCEL|DECIDE|APPLY|DIGEST …: a group's part of a check across groups, sent by the coordinator of a sharded cluster.",
		subcommands: []string{"reserve", "cancel", "decide", "apply", "digest"},
		Args: []Arg{
			{Name: "subcommand", Type: "oneof", Sub: []Arg{
				{Name: "reserve", Type: "pure-token", Token: "RESERVE"},
				{Name: "cancel", Type: "pure-token", Token: "CANCEL"},
				{Name: "decide", Type: "pure-token", Token: "DECIDE"},
				{Name: "apply", Type: "pure-token", Token: "APPLY"},
				{Name: "digest", Type: "pure-token", Token: "DIGEST"},
			}},
			{Name: "arg", Type: "string", Optional: true, Multiple: true},
		},
		run: runPart,
		check: func(m *Machine, args [][]byte) string {
			_, bad := parsePart(m, args)
			return bad
		},
	}}
}

const partSyntax = "ERR syntax error: RL.PART RESERVE <rules> <id> <ttl> <RL.CHECK|RL.SHOULDRATELIMIT> <domain> … | CANCEL <domain> <id> [<ttl>] | DECIDE <rules> <RL.CHECK|RL.SHOULDRATELIMIT> <domain> … | APPLY <RL.RULES|RL.OVERRIDE|RL.SCALE> … | DIGEST [<domain>]"

// part is an RL.PART parsed: its subcommand, and for a deciding one the
// command it decides (cmd, args: the command's own arguments).
type part struct {
	sub  string
	cmd  *Command
	args [][]byte
	// rules is the coordinator's digest of the domain's rules; id and ttl
	// a reservation's.
	rules []byte
	held  heldAs
}

// parsePart reads an RL.PART, with its command's checks.
func parsePart(m *Machine, args [][]byte) (part, string) {
	var pt part
	for _, sub := range []string{"reserve", "cancel", "decide", "apply", "digest"} {
		if resp.EqualFold(args[1], sub) {
			pt.sub = sub
		}
	}
	switch pt.sub {
	case "reserve", "decide":
		i := 3
		if pt.sub == "reserve" {
			i = 5
		}
		if len(args) < i+2 {
			return pt, partSyntax
		}
		pt.rules, pt.args = args[2], args[i:]
		pt.cmd = m.Lookup(args[i])
		if pt.cmd == nil || (pt.cmd.Name != "rl.check" && pt.cmd.Name != "rl.shouldratelimit") {
			return pt, "ERR a part decides RL.CHECK or RL.SHOULDRATELIMIT"
		}
		if !pt.cmd.ArityOK(len(pt.args)) {
			return pt, "ERR wrong number of arguments for '" + pt.cmd.Name + "' command"
		}
		if pt.sub == "reserve" {
			// RL.RESERVE's rules for the id and ttl.
			ttl, bad := parseReserveHead([][]byte{nil, nil, args[3], args[4]})
			if bad != "" {
				return pt, bad
			}
			pt.held = heldAs{id: args[3], ttl: ttl}
		}
		return pt, pt.cmd.Check(m, pt.args)
	case "cancel":
		if len(args) != 4 && len(args) != 5 {
			return pt, partSyntax
		}
		if _, bad := parseSettle(args[1:4]); bad != "" {
			return pt, bad
		}
		if len(args) == 5 {
			ttl, bad := parseReserveHead([][]byte{nil, nil, args[3], args[4]})
			if bad != "" {
				return pt, bad
			}
			pt.held = heldAs{id: args[3], ttl: ttl}
		}
		return pt, ""
	case "apply":
		if len(args) < 3 {
			return pt, partSyntax
		}
		if cmd := m.Lookup(args[2]); cmd != nil && cmd.everyGroup && cmd.ArityOK(len(args)-2) {
			pt.cmd, pt.args = cmd, args[2:]
			return pt, cmd.Check(m, pt.args)
		}
	case "digest":
		if len(args) <= 3 {
			return pt, ""
		}
	}
	return pt, partSyntax
}

func runPart(x *exec, args [][]byte) {
	pt, bad := parsePart(x.m, args)
	if bad != "" {
		x.fail(bad)
		return
	}
	switch pt.sub {
	case "reserve", "decide":
		domain := view(pt.args[1])
		if mine := x.m.RulesDigest(domain); mine != string(pt.rules) {
			x.out.Refusal = ErrRulesDiffer
			x.fail("ERR RULESDIFFER domain '" + resp.Clip(pt.args[1], 64) + "': the coordinator's rules are " +
				resp.Clip(pt.rules, 64) + ", this group's " + mine)
			return
		}
		switch {
		case pt.sub == "decide":
			pt.cmd.run(x, pt.args)
		case pt.cmd.Name == "rl.shouldratelimit":
			shouldRateLimit(x, pt.args, &pt.held)
		default:
			// RL.RESERVE's arguments: <domain> <id> <ttl> then RL.CHECK's.
			reserve := make([][]byte, 0, len(pt.args)+2)
			reserve = append(reserve, args[1], pt.args[1], args[3], args[4])
			runReserve(x, append(reserve, pt.args[2:]...))
		}
	case "cancel":
		settle(x, args[2], args[3], 0, settleCancel, pt.held.ttl)
	case "apply":
		pt.cmd.run(x, pt.args)
	case "digest":
		x.instant()
		domain := ""
		if len(args) == 3 {
			domain = string(args[2])
		}
		x.w.BulkString(x.m.RulesDigest(domain))
	}
}

// SplitDescriptor is one descriptor of a check as a coordinator splits it
// by group.
type SplitDescriptor struct {
	// Words are its words in the command (a slice of the command's).
	Words [][]byte
	// Slot is the slot of the counter it charges, or -1 when no limit
	// applies to it (no rule, an unlimited one, an unknown domain): then
	// Status is its RL.SHOULDRATELIMIT status, the same in every group.
	Slot   int
	Status RLSStatus
	// Hits is what it charges (RL.SHOULDRATELIMIT's; RL.CHECK's cost).
	Hits int64
}

// Split plans an RL.CHECK or RL.SHOULDRATELIMIT (args, the command's name
// first) without applying it: each descriptor's words, and the slot of
// the counter it charges. head are the words between the domain and the
// first descriptor (COST n; hits_addend). The descriptors are written
// over buf (reused when it has room: a caller that only looks, as
// Coordinator.Spans on every check, allocates nothing). bad is the error
// reply of a malformed command.
func (m *Machine) Split(args [][]byte, buf []SplitDescriptor) (head [][]byte, descs []SplitDescriptor, bad string) {
	p := m.plan()
	defer m.release(p)
	rls := resp.EqualFold(args[0], "rl.shouldratelimit")
	if rls {
		bad = parseShouldRateLimit(args, p)
	} else {
		bad = parseDescriptors(args[2:], p)
	}
	if bad != "" {
		return nil, nil, bad
	}
	domain := view(args[1])
	if rls {
		m.planShouldRateLimit(p, domain, false)
		descs = sized(buf, len(p.descs))
		at := 3
		for i, desc := range p.descs {
			n := 4 + 2*(desc.to-desc.from)
			d := &descs[i]
			d.Words, d.Slot, d.Hits = args[at:at+n:at+n], -1, desc.hits
			at += n
			if desc.negative {
				d.Hits = 0
			}
			if i < len(p.of) && p.of[i] >= 0 {
				d.Slot = slot.Of(p.span(p.spans[p.of[i]].counter))
				continue
			}
			unlimited := i < len(p.matched) && p.matched[i] != nil && p.matched[i].Algorithm == policy.Unlimited
			d.Status = rlsStatus(nil, desc, unlimited, false, 0)
		}
		return args[2:3:3], descs, ""
	}
	at := 2
	if len(args) > 2 && resp.EqualFold(args[2], "cost") {
		at = 4
	}
	head = args[2:at:at]
	descs = sized(buf, len(p.bounds))
	from := 0
	for i, end := range p.bounds {
		n := 1 + 2*(end-from)
		descs[i] = SplitDescriptor{Words: args[at : at+n : at+n], Slot: -1, Hits: p.cost}
		at += n
		from = end
	}
	d := m.rules().Domain(domain)
	if d == nil {
		return head, descs, ""
	}
	p.forDomain(domain, false)
	p.addMatched(d)
	k := 0 // the planned checks are the limiting descriptors', in order
	for i, r := range p.matched {
		if limits(r) {
			descs[i].Slot = slot.Of(p.span(p.spans[k].counter))
			k++
		}
	}
	return head, descs, ""
}

// sized is buf holding n zero descriptors, grown if it must.
func sized(buf []SplitDescriptor, n int) []SplitDescriptor {
	buf = slices.Grow(buf[:0], n)[:n]
	clear(buf)
	return buf
}
