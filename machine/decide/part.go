package decide

import (
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// A check across the groups of a sharded cluster is split by group (the
// coordinator, package crossgroup): each group is sent the descriptors
// whose counters it owns as a part, and the check is admitted only when
// every part is.
//
//	RL.PART RESERVE <rules> <id> <ttl> [ORDER <i,j,…>] <RL.CHECK|RL.SHOULDRATELIMIT> <domain> …
//	RL.PART CANCEL <domain> <id> <ttl> <slot> …   a part refused: give them back
//	RL.PART SETTLE <domain> <id> <actual|CANCEL> <HEAD|PARTS> <slot> …
//	RL.PART HOLD <domain> <id> <ttl> <args-sum> <limit> <remaining> <retry-after> <reset-after> <window> <name> <slot> …
//	RL.PART DECIDE <rules> <RL.CHECK|RL.SHOULDRATELIMIT> <domain> …
//	RL.PART APPLY <RL.RULES|RL.OVERRIDE|RL.SCALE …>
//	RL.PART DIGEST [<domain>]
//
// RESERVE decides the command as its group's share and holds what it
// charged as a reservation's parts (one per slot of its counters, no
// head), so CANCEL gives it back with the exact, never-lax refunds of
// reservations. A CANCEL that finds a slot's part not held leaves a
// tombstone there for the ttl: the reserve may still be on its way (its
// answer was lost), and when it arrives it is refused and charges nothing
// — so a cancel confirmed stays true. When every part of a check admitted
// they are left to expire, which keeps the charge. An RL.RESERVE across
// groups is parts in every group, then the head its coordinator keeps
// (HOLD, in the domain's slot: the reply, and the slots of the parts);
// RL.SETTLE settles each group's parts (SETTLE … PARTS), then the
// coordinator's with the head (SETTLE … HEAD). DECIDE is a check whose
// counters all sit in one group, decided once;
// DECIDE is a check whose counters all sit in one group, decided once.
// A part has no key, so the group it is sent to applies it instead of
// redirecting by the domain's slot; its fence still refuses counters the
// group does not own. Every deciding part carries the digest of the
// domain's rules at its coordinator (RulesDigest): a group whose rules
// differ refuses it, naming both, rather than decide by other rules.
// APPLY is configuration another group applied, for this one too; DIGEST
// is RulesDigest (RL.RULES LIST compares the groups').

func (m *Room) partCommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "rl.part", Arity: -2, Flags: []string{"write", "denyoom"}, Group: "sluice", Since: "1.3.0", Complexity: "O(D) where D is the number of descriptor entries",
			Summary: "RESERVE|CANCEL|DECIDE|APPLY|DIGEST …: a group's part of a check across groups, sent by the coordinator of a sharded cluster.",
			Args: []cmdspec.Arg{
				{Name: "subcommand", Type: "oneof", Sub: []cmdspec.Arg{
					{Name: "reserve", Type: "pure-token", Token: "RESERVE"},
					{Name: "cancel", Type: "pure-token", Token: "CANCEL"},
					{Name: "settle", Type: "pure-token", Token: "SETTLE"},
					{Name: "hold", Type: "pure-token", Token: "HOLD"},
					{Name: "decide", Type: "pure-token", Token: "DECIDE"},
					{Name: "apply", Type: "pure-token", Token: "APPLY"},
					{Name: "digest", Type: "pure-token", Token: "DIGEST"},
				}},
				{Name: "arg", Type: "string", Optional: true, Multiple: true},
			}}, Slots: room.AllSlots, Stores: room.AlwaysStores, FromMember: true,
		Subcommands: partSubcommands,
		Run:         m.run(runPart),
		Check: func(args [][]byte) string {
			_, bad := parsePart(m, args)
			return bad
		},
	}}
}

var partSubcommands = []string{"reserve", "cancel", "settle", "hold", "decide", "apply", "digest"}

const partSyntax = "ERR syntax error: RL.PART RESERVE <rules> <id> <ttl> [ORDER <i,j,…>] <RL.CHECK|RL.SHOULDRATELIMIT> <domain> … | CANCEL <domain> <id> <ttl> <slot> … | SETTLE <domain> <id> <actual|CANCEL> <HEAD|PARTS> <slot> … | HOLD <domain> <id> <ttl> <args-sum> <limit> <remaining> <retry-after> <reset-after> <window> <name> <slot> … | DECIDE <rules> <RL.CHECK|RL.SHOULDRATELIMIT> <domain> … | APPLY <RL.RULES|RL.OVERRIDE|RL.SCALE> … | DIGEST [<domain>]"

// part is an RL.PART parsed: its subcommand, and for a deciding one the
// command it decides (cmd, args: the command's own arguments).
type part struct {
	sub  string
	cmd  TableCommand
	args [][]byte
	// rls: the command decided is RL.SHOULDRATELIMIT (else RL.CHECK).
	rls bool
	// rules is the coordinator's digest of the domain's rules; id and ttl
	// a reservation's.
	rules []byte
	held  heldAs
	// orders, for a RESERVE, are each descriptor's place in the whole
	// reserve (its settle lists the limits in that order).
	orders []int
	// settle is a CANCEL's or SETTLE's; reply a HOLD's head's.
	settle settling
	reply  room.CheckResult
	// sum is a HOLD's reserve's arguments' (ReserveArgsSum).
	sum uint64
}

// parsePart reads an RL.PART, with its command's checks.
func parsePart(m *Room, args [][]byte) (part, string) {
	var pt part
	for _, sub := range partSubcommands {
		if resp.EqualFold(args[1], sub) {
			pt.sub = sub
		}
	}
	switch pt.sub {
	case "reserve", "decide":
		i := 3
		if pt.sub == "reserve" {
			i = 5
			if len(args) > i+1 && resp.EqualFold(args[i], "order") {
				var bad string
				if pt.orders, bad = parseOrders(args[i+1]); bad != "" {
					return pt, bad
				}
				i += 2
			}
		}
		if len(args) < i+2 {
			return pt, partSyntax
		}
		pt.rules, pt.args = args[2], args[i:]
		name := "rl.check"
		if pt.rls = resp.EqualFold(args[i], "rl.shouldratelimit"); pt.rls {
			name = "rl.shouldratelimit"
		}
		if pt.cmd = m.core.Lookup(args[i]); pt.cmd == nil || (!pt.rls && !resp.EqualFold(args[i], name)) {
			return pt, "ERR a part decides RL.CHECK or RL.SHOULDRATELIMIT"
		}
		if !pt.cmd.ArityOK(len(pt.args)) {
			return pt, "ERR wrong number of arguments for '" + name + "' command"
		}
		if pt.sub == "reserve" {
			// RL.RESERVE's rules for the id and ttl.
			ttl, bad := parseReserveHead([][]byte{nil, nil, args[3], args[4]})
			if bad != "" {
				return pt, bad
			}
			pt.held = heldAs{id: args[3], ttl: ttl}
		}
		return pt, pt.cmd.Check(pt.args)
	case "cancel":
		if len(args) < 4 {
			return pt, partSyntax
		}
		if _, bad := parseSettle(args[1:4]); bad != "" {
			return pt, bad
		}
		pt.settle = settling{domain: args[2], id: args[3], mode: settleCancel, head: true}
		if len(args) == 4 {
			return pt, ""
		}
		ttl, bad := parseReserveHead([][]byte{nil, nil, args[3], args[4]})
		if bad != "" {
			return pt, bad
		}
		pt.held = heldAs{id: args[3], ttl: ttl}
		if len(args) == 5 {
			// Written before parts were held by slot: the record at the
			// domain's key, with no tombstone.
			return pt, ""
		}
		pt.settle.head, pt.settle.tombstone = false, ttl
		pt.settle.slots, bad = parseSlotList(args[5:])
		return pt, bad
	case "settle":
		if len(args) < 6 {
			return pt, partSyntax
		}
		pt.settle = settling{domain: args[2], id: args[3]}
		if resp.EqualFold(args[4], "cancel") {
			pt.settle.mode = settleCancel
		} else {
			actual, bad := parseSettle([][]byte{nil, nil, args[3], args[4]})
			if bad != "" {
				return pt, bad
			}
			pt.settle.actual = actual
		}
		switch {
		case resp.EqualFold(args[5], "head"):
			pt.settle.head = true
		case !resp.EqualFold(args[5], "parts"):
			return pt, partSyntax
		}
		var bad string
		pt.settle.slots, bad = parseSlotList(args[6:])
		return pt, bad
	case "hold":
		if len(args) < 12 {
			return pt, partSyntax
		}
		ttl, bad := parseReserveHead([][]byte{nil, nil, args[3], args[4]})
		if bad != "" {
			return pt, bad
		}
		pt.held = heldAs{id: args[3], ttl: ttl}
		sum, err := strconv.ParseUint(string(args[5]), 10, 64)
		if err != nil {
			return pt, "ERR a held reserve's arguments sum must be an unsigned integer"
		}
		pt.sum = sum
		r := &pt.reply
		for i, v := range []*int64{&r.Limit, &r.Remaining, &r.RetryAfter, &r.ResetAfter, &r.Window} {
			n, ok := resp.ParseInt(args[6+i])
			if !ok {
				return pt, "ERR a held reply's numbers must be integers"
			}
			*v = n
		}
		r.Name = string(args[11])
		pt.settle.slots, bad = parseSlotList(args[12:])
		return pt, bad
	case "apply":
		if len(args) < 3 {
			return pt, partSyntax
		}
		if cmd := m.core.Lookup(args[2]); cmd != nil && cmd.EveryGroup() && cmd.ArityOK(len(args)-2) {
			pt.cmd, pt.args = cmd, args[2:]
			return pt, cmd.Check(pt.args)
		}
	case "digest":
		if len(args) <= 3 {
			return pt, ""
		}
	}
	return pt, partSyntax
}

func runPart(x *apply, args [][]byte) {
	pt, bad := parsePart(x.m, args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	switch pt.sub {
	case "reserve", "decide":
		domain := view(pt.args[1])
		if mine := x.m.RulesDigest(domain); mine != string(pt.rules) {
			x.out.Refusal = ErrRulesDiffer
			x.FailFor(room.ReasonRulesDiffer, "ERR RULESDIFFER domain '"+resp.Clip(pt.args[1], 64)+"': the coordinator's rules are "+
				resp.Clip(pt.rules, 64)+", this group's "+mine)
			return
		}
		switch {
		case pt.sub == "decide":
			x.Run(pt.cmd, pt.args)
		case pt.rls:
			shouldRateLimit(x, pt.args, pt.held.start)
		default:
			// RL.RESERVE's arguments: <domain> <id> <ttl> then RL.CHECK's.
			words := make([][]byte, 0, len(pt.args)+2)
			words = append(words, args[1], pt.args[1], args[3], args[4])
			orders := pt.orders
			if orders == nil {
				orders = []int{} // a part: never a head here
			}
			reserve(x, append(words, pt.args[2:]...), orders)
		}
	case "cancel", "settle":
		settle(x, pt.settle)
	case "hold":
		hold(x, args[2], &pt)
	case "apply":
		x.Run(pt.cmd, pt.args)
	case "digest":
		x.Instant()
		domain := ""
		if len(args) == 3 {
			domain = string(args[2])
		}
		x.out.Digest = x.m.RulesDigest(domain)
		x.w.BulkString(x.out.Digest)
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
	Status room.RLSStatus
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
func (m *Room) Split(args [][]byte, buf []SplitDescriptor) (head [][]byte, descs []SplitDescriptor, bad string) {
	p := m.plan()
	defer m.release(p)
	rls := resp.EqualFold(args[0], "rl.shouldratelimit")
	if rls {
		bad = parseShouldRateLimit(m, args, p)
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

// parseSlotList reads slots (at most one of each), ascending.
func parseSlotList(args [][]byte) ([]int, string) {
	slots := make([]int, 0, len(args))
	for _, a := range args {
		n, ok := resp.ParseInt(a)
		if !ok || n < 0 || n >= slot.Count {
			return nil, "ERR a slot must be an integer in [0, 16383]"
		}
		slots = append(slots, int(n))
	}
	slices.Sort(slots)
	return slices.Compact(slots), ""
}

// hold keeps the head of a reservation across groups whose parts every
// group admitted (RL.PART HOLD), in the domain's slot, unless one is held
// already: a retried reserve keeps the first. It answers the head's
// reply.
func hold(x *apply, domain []byte, pt *part) {
	key := appendReservationKey(nil, view(domain), pt.held.id)
	at := slot.Of(key)
	if err := x.m.fenceSlot(at); err != nil {
		x.Error(err)
		return
	}
	s, now := x.LockSlot(at)
	defer x.Unlock(s)
	r, err := reservationAt(s, key, keyspace.KindReservation, now)
	if err != nil {
		x.Error(err)
		return
	}
	if r != nil && r.Args != 0 && pt.sum != 0 && r.Args != pt.sum {
		x.out.Refusal = ErrHeldOther
		x.Fail(HeldWithOtherArgs(pt.held.id))
		return
	}
	if r == nil {
		r = &ReservationState{Reply: pt.reply, Slots: pt.settle.slots, Args: pt.sum}
		if _, _, err := storeReservation(s, key, keyspace.KindReservation, now+pt.held.ttl, r, nil, true); err != nil {
			x.Error(err)
			return
		}
		x.m.reserved.Add(1)
	}
	x.answerCheck(r.Reply)
}

// parseOrders reads RESERVE's ORDER: comma-separated places, one per
// descriptor.
func parseOrders(b []byte) ([]int, string) {
	var out []int
	for f := range strings.SplitSeq(string(b), ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n >= maxLimits || len(out) >= maxLimits {
			return nil, "ERR ORDER must be comma-separated descriptor places"
		}
		out = append(out, n)
	}
	return out, ""
}
