package decide

import (
	"errors"
	"slices"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// RL.RESERVE, RL.SETTLE and RL.CANCEL: charge now, settle when the cost is
// known (an LLM response's tokens). A reserve is RL.CHECK that also keeps,
// under the caller's id, what each limit was charged and where; a settle
// gives back what the request did not use (gcra.Refund, the window
// kinds' and quota's Refund: never laxer than the replay without those
// units, exact when nothing else touched the key) or charges what it used
// beyond (Force: past the limit if it must, the work is done). The
// reservation is records — a head in the domain's slot and, in a sharded
// group, a part in each counter's slot (reservation.go) — so it is
// replicated, snapshotted and moved like the counters; one never settled
// keeps its charge and is swept when its ttl ends.

func (m *Room) reserveCommands() []room.Command[Exec] {
	descriptors := cmdspec.Arg{Name: "descriptor", Type: "block", Token: "DESCRIPTOR", Multiple: true, Sub: []cmdspec.Arg{
		{Name: "entry", Type: "block", Multiple: true, Sub: []cmdspec.Arg{{Name: "key", Type: "string"}, {Name: "value", Type: "string"}}},
	}}
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "rl.reserve", Arity: -7, Flags: []string{"write", "denyoom"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.3.0", Complexity: "O(D) where D is the number of descriptor entries",
			Summary: "RL.CHECK that holds what it charged under a reservation id for ttl seconds, to be settled with the actual cost: replies as RL.CHECK; the same id again while held replies the same and charges nothing, and once settled is refused until its ttl ends.",
			Args: []cmdspec.Arg{
				{Name: "domain", Type: "key"}, {Name: "reservation-id", Type: "string"}, {Name: "ttl-seconds", Type: "integer"},
				{Name: "cost", Type: "integer", Token: "COST", Optional: true}, descriptors,
			}}, Decides: true, Stores: room.AlwaysStores, Slots: room.AllSlots, Run: m.run(runReserve), Check: m.check(checkReserve),
	}, {
		Spec: cmdspec.Spec{Name: "rl.settle", Arity: 4, Flags: []string{"write"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.3.0", Complexity: "O(L) where L is the number of limits reserved",
			Summary: "Settles a reservation with the actual cost: gives back what was not used, charges what was used beyond (past the limit if it must); replies [name, reserved, actual, refunded, charged] per limit, or nil for an unknown or expired id.",
			Args:    []cmdspec.Arg{{Name: "domain", Type: "key"}, {Name: "reservation-id", Type: "string"}, {Name: "actual-cost", Type: "integer"}}}, Slots: room.AllSlots, Run: m.run(runSettle), Check: m.check(checkSettle),
	}, {
		Spec: cmdspec.Spec{Name: "rl.cancel", Arity: 3, Flags: []string{"write", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1,
			Group: "sluice", Since: "1.3.0", Complexity: "O(L) where L is the number of limits reserved",
			Summary: "RL.SETTLE with an actual cost of 0: gives back everything the reservation holds.",
			Args:    []cmdspec.Arg{{Name: "domain", Type: "key"}, {Name: "reservation-id", Type: "string"}}}, Slots: room.AllSlots, Run: m.run(runSettle), Check: m.check(checkSettle),
	}}
}

// maxReserveTTL bounds a reservation's ttl (a day).
const maxReserveTTL = 86400

// checkReservationID refuses an id a client may not name: empty, over
// 256 bytes, or beginning with a NUL byte (the leases' ids, RL.LEASE).
func checkReservationID(id []byte) string {
	switch {
	case len(id) == 0 || len(id) > maxReservationID:
		return "ERR a reservation id must be 1 to 256 bytes"
	case id[0] == 0:
		return "ERR a reservation id must not begin with a NUL byte (those are the leases')"
	}
	return ""
}

// parseReserveHead reads RL.RESERVE's id and ttl (seconds, in ns).
func parseReserveHead(args [][]byte) (ttl int64, bad string) {
	if bad := checkReservationID(args[2]); bad != "" {
		return 0, bad
	}
	n, ok := resp.ParseInt(args[3])
	if !ok || n < 1 || n > maxReserveTTL {
		return 0, "ERR ttl-seconds must be an integer in [1, 86400]"
	}
	return n * 1_000_000_000, ""
}

func checkReserve(m *Room, args [][]byte) string {
	if _, bad := parseReserveHead(args); bad != "" {
		return bad
	}
	p := m.plan()
	defer m.release(p)
	return parseDescriptors(args[4:], p)
}

// appendReservationKey appends where a domain's reservation id is held: in
// the domain's slot, beside its overrides and scale.
func appendReservationKey(dst []byte, domain string, id []byte) []byte {
	dst = policy.AppendDescriptorKey(dst, domain, nil)
	dst = append(dst, "#reservation:"...)
	return append(dst, id...)
}

// runReserve is RL.RESERVE <domain> <id> <ttl> [COST n] DESCRIPTOR k v … [DESCRIPTOR …].
func runReserve(x *apply, args [][]byte) { reserve(x, args, nil) }

// reserve decides an RL.RESERVE (args: its name or a part's subcommand,
// then the domain, id, ttl and RL.CHECK's words) and holds what it
// charged: as a reservation of its own that RL.SETTLE finds in the
// domain's slot; or with orders (each descriptor's place in the whole
// reserve), as a group's share of one across groups (RL.PART RESERVE), in
// parts only — the coordinator keeps the head.
func reserve(x *apply, args [][]byte, orders []int) {
	head := orders == nil
	ttl, bad := parseReserveHead(args)
	p := x.m.plan()
	defer x.m.release(p)
	if bad == "" {
		bad = parseDescriptors(args[4:], p)
	}
	if bad != "" {
		x.Fail(bad)
		return
	}
	domain := view(args[1])
	p.forDomain(domain, x.m.policyRecords.Load())
	if d := x.m.rules().Domain(domain); d != nil {
		p.addMatched(d)
	}
	p.seal()
	var headKey []byte
	if head {
		// The head's key goes after the plan's: the checks' keys are
		// slices of what is there (an append that moves the array leaves
		// them on the old one, as valid).
		start := len(p.keys)
		p.keys = appendReservationKey(p.keys, domain, args[2])
		headKey = p.keys[start:]
		p.anchor = headKey // the domain's slot, where the head is kept
		// The head moves with the domain's slot: only its owner keeps it.
		if err := x.m.fenceSlot(slot.Of(headKey)); err != nil {
			x.Error(err)
			return
		}
	}
	now, ds, took, err := x.lockPlan(p)
	if err != nil {
		x.Error(err)
		return
	}
	defer x.ReleaseGroup(&p.locks, took)
	h := reservingOf(p)
	h.start(domain, args[2], now, ttl, p.cost, orders)
	if head {
		h.headKey, h.headSlot = headKey, ds
		h.split = x.m.placement.Owned() != nil
		h.args = ReserveArgsSum(args[3:])
	}
	if head && x.At(1) { // level 1: a settled id is kept (levels)
		switch settled, err := h.settled(now); {
		case err != nil:
			x.Error(err)
			return
		case settled:
			// A late copy of a reserve whose reservation was settled (or
			// the id reused within its ttl): it must not charge again.
			x.Fail(SettledID(args[2]))
			return
		}
	}
	if r, err := h.existing(p.checks, now); err != nil || r != nil {
		if err != nil {
			x.Error(err)
			return
		}
		if r.Cancelled {
			// An earlier attempt's part was cancelled before it came
			// (its answer was lost): this one may be that attempt, late.
			x.FailFor(room.ReasonNotNow, errCancelledID)
			return
		}
		if r.Args != 0 && h.args != 0 && r.Args != h.args {
			x.out.Refusal = ErrHeldOther
			x.Fail(HeldWithOtherArgs(args[2]))
			return
		}
		// A retry of a reserve whose reply was lost: the same answer,
		// nothing charged again.
		x.answerCheck(r.Reply)
		return
	}
	if len(p.checks) == 0 {
		// Nothing limits the request: nothing is charged, so nothing is
		// held either — a flood of ids that match no rule must not take
		// memory. Its settle answers as an unknown id's (nil).
		x.answerCheck(room.NoLimit)
		return
	}
	v, err := x.decideLocked(p, now, ds, h)
	if err != nil {
		x.Error(err)
		return
	}
	res := x.checkResult(p.checks, v)
	if !v.refused {
		if err := h.keep(res); err != nil {
			x.Error(err)
			return
		}
		if head {
			x.m.reserved.Add(1)
		}
	}
	x.answerCheck(res)
}

// fenceSlot refuses a write to a record of slot s this group does not own.
func (m *Room) fenceSlot(s int) error {
	if o := m.placement.Owned(); o != nil && !o.Owns(s) {
		return room.FenceError(o.NotOwned(s))
	}
	return nil
}

// heldAs is a reservation a decision other than RL.RESERVE's keeps (a
// group's part of an RL.SHOULDRATELIMIT across groups): its id and ttl
// (ns).
type heldAs struct {
	id  []byte
	ttl int64
}

// errCancelledID answers a reserve of an id whose part was cancelled
// moments ago, before its reserve came (a tombstone): nothing is charged.
const errCancelledID = "TRYAGAIN the reservation id was cancelled moments ago, before an earlier attempt's part arrived; ask again in a few seconds"

// HeldWithOtherArgs is the refusal of a reserve whose id is held by a
// reserve of other arguments.
func HeldWithOtherArgs(id []byte) string {
	return "ERR reservation " + resp.Clip(id, 64) + " is held with other arguments"
}

// SettledID is the refusal of a reserve whose id was settled or cancelled
// within its ttl.
func SettledID(id []byte) string {
	return "ERR reservation " + resp.Clip(id, 64) + " was settled or cancelled; its id is kept until its ttl ends (a late copy of its RL.RESERVE charges nothing)"
}

// errReservationHeld: a part's reservation id is held already (ids are
// random, so this is a replayed part: it must not charge twice).
var errReservationHeld = errors.New("the reservation id is held already")

// start makes the holder of a decision that keeps its charge in parts
// (nil when nothing limits it: nothing is held).
func (held *heldAs) start(p *plan, domain string, now int64) (holder, error) {
	if len(p.checks) == 0 {
		return nil, nil
	}
	h := reservingOf(p)
	h.start(domain, held.id, now, held.ttl, p.cost, nil)
	switch r, err := h.existing(p.checks, now); {
	case err != nil:
		return nil, err
	case r != nil:
		return nil, errReservationHeld
	}
	return h, nil
}

// reservingOf is the plan's holder, made the first time the pooled plan
// keeps a charge.
func reservingOf(p *plan) *reserving {
	h, _ := p.held.(*reserving)
	if h == nil {
		h = &reserving{}
		p.held = h
	}
	return h
}

// reset forgets what was held; the scratch stays (holdScratch).
func (h *reserving) reset() {
	h.start("", nil, 0, 0, 0, nil)
	clear(h.kept[:cap(h.kept)])
}

// reserving is a reservation's holder: once the limits admit, before they
// are charged, it keeps one part per slot of its counters and, with a
// head key, the head.
type reserving struct {
	domain string
	id     []byte
	at     int64
	// expireAt is when every record it keeps expires.
	expireAt int64
	cost     int64
	// headKey, when set, is where the head is kept, in headSlot (the
	// domain's, which the plan holds), as a record of headKind
	// (KindReservation; a lease's grant is KindLease).
	headKey  []byte
	headSlot *keyspace.Slot
	headKind keyspace.Kind
	// orders are the limits' places in a reserve across groups (nil: the
	// checks').
	orders []int
	// args is the head's ReserveArgsSum.
	args uint64
	// split: the group is a sharded cluster's, whose slots move, so each
	// counter's slot keeps its own part. Else the head holds every limit:
	// one record, as cheap as a reservation can be.
	split bool
	// kept are the records hold inserted, to undo, and to give the reply.
	kept []keptRecord
	// Scratch, kept across reservations: the checks held, their limits,
	// the head's part slots, the keys, a record being encoded.
	held   []int
	limits []HeldLimit
	slots  []int
	keys   []byte
	enc    []byte
}

// keptRecord is a record a reserving inserted: where, and its limits
// (reserving.limits[from:to]).
type keptRecord struct {
	key      []byte
	slot     *keyspace.Slot
	kind     keyspace.Kind
	from, to int
	// obj is the record's object (nil: its state is in the record).
	obj *ReservationState
}

// start readies h for a reservation (keeping its scratch).
func (h *reserving) start(domain string, id []byte, now, ttl, cost int64, orders []int) {
	*h = reserving{domain: domain, id: id, at: now, expireAt: now + ttl, cost: cost, orders: orders, split: true, headKind: keyspace.KindReservation,
		kept: h.kept[:0], held: h.held[:0], limits: h.limits[:0], slots: h.slots[:0], keys: h.keys[:0], enc: h.enc[:0]}
}

// existing is the reservation already held under the id, found at the
// head or at the part in the first counter's slot (a reserve retried, or
// a part cancelled before it came: a tombstone), or nil. The plan's slots
// are held.
func (h *reserving) existing(checks []limitCheck, now int64) (*ReservationState, error) {
	if h.headKey != nil {
		if r, err := reservationAt(h.headSlot, h.headKey, h.headKind, now); err != nil || r != nil {
			return r, err
		}
	}
	if len(checks) == 0 || !h.split {
		return nil, nil // a group whose slots never move keeps no parts
	}
	var buf [64]byte
	return reservationAt(checks[0].slot, appendPartKey(buf[:0], h.domain, h.id, checks[0].slotIndex), keyspace.KindReservationPart, now)
}

// settled reports whether the head's id was settled within its ttl (the
// mark keepSettled left). The plan's slots are held.
func (h *reserving) settled(now int64) (bool, error) {
	var buf [128]byte
	r, err := reservationAt(h.headSlot, appendSettledMark(buf[:0], h.domain, h.id, slot.Of(h.headKey)), keyspace.KindReservationPart, now)
	return r != nil && r.Cancelled, err
}

func (h *reserving) hold(checks []limitCheck) error {
	h.kept = h.kept[:0]
	domainSlot := -1
	if h.headKey != nil {
		domainSlot = slot.Of(h.headKey)
	}
	// The limits held, in the order they are kept: the head's (the
	// domain's slot) first, then by slot; each record's a run of them.
	held := h.held[:0]
	nkeys := 0
	for i := range checks {
		if _, ok := heldLimit(&checks[i], h.cost); ok {
			held = append(held, i)
			nkeys += len(checks[i].key)
		}
	}
	rank := func(i int) int {
		if s := checks[i].slotIndex; s != domainSlot && h.split {
			return s + 1
		}
		return 0
	}
	for i := 1; i < len(held); i++ { // insertion sort: a few limits
		for j := i; j > 0 && rank(held[j]) < rank(held[j-1]); j-- {
			held[j], held[j-1] = held[j-1], held[j]
		}
	}
	h.held = held
	// The keys (the counters', then the parts') go in one array, grown
	// first: the limits and the kept records point into it.
	h.keys = slices.Grow(h.keys[:0], nkeys+len(held)*(partKeyBase+len(h.domain)+len(h.id)))
	h.limits = h.limits[:0]
	for _, i := range held {
		l, _ := heldLimit(&checks[i], h.cost)
		start := len(h.keys)
		h.keys = append(h.keys, l.Key...)
		l.Key = h.keys[start:len(h.keys):len(h.keys)]
		l.Order = i
		if i < len(h.orders) {
			l.Order = h.orders[i]
		}
		h.limits = append(h.limits, l)
	}
	headEnd := 0
	for headEnd < len(held) && rank(held[headEnd]) == 0 {
		headEnd++
	}
	h.slots = h.slots[:0]
	for k := headEnd; k < len(held); {
		c := &checks[held[k]]
		end := k + 1
		for end < len(held) && checks[held[end]].slotIndex == c.slotIndex {
			end++
		}
		start := len(h.keys)
		h.keys = appendPartKey(h.keys, h.domain, h.id, c.slotIndex)
		if err := h.insert(checks, c.slot, c.slotIndex, h.keys[start:len(h.keys):len(h.keys)], keyspace.KindReservationPart, k, end); err != nil {
			return err
		}
		h.slots = append(h.slots, c.slotIndex)
		k = end
	}
	if h.headKey != nil {
		return h.insert(checks, h.headSlot, domainSlot, h.headKey, h.headKind, 0, headEnd)
	}
	return nil
}

// partKeyBase bounds what a part's key adds to its domain and id.
const partKeyBase = len("rl-res:{TTTT}") + 20 + len(":/")

// record is the reservation record k, its reply as given.
func (h *reserving) record(k *keptRecord, reply room.CheckResult) ReservationState {
	r := ReservationState{Reply: reply, Limits: h.limits[k.from:k.to:k.to]}
	if k.kind == h.headKind {
		r.Slots, r.Args = h.slots, h.args
	}
	return r
}

// insert keeps the record of limits[from:to] at key of slot s (number
// at); an error undoes what was kept before it.
func (h *reserving) insert(checks []limitCheck, s *keyspace.Slot, at int, key []byte, kind keyspace.Kind, from, to int) error {
	k := keptRecord{key: key, slot: s, kind: kind, from: from, to: to}
	r := h.record(&k, room.CheckResult{})
	var err error
	if h.enc, k.obj, err = storeReservation(s, key, kind, h.expireAt, &r, h.enc, h.split); err != nil {
		h.undo()
		return err
	}
	h.kept = append(h.kept, k)
	for i := range checks {
		if checks[i].slotIndex == at {
			checks[i].moved = true // the insert may have moved its record
		}
	}
	return nil
}

// keep gives the records a retried reserve reads the reserve's reply: the
// head, or without one every part.
func (h *reserving) keep(reply room.CheckResult) error {
	for i := range h.kept {
		k := &h.kept[i]
		if h.headKey != nil && k.kind != h.headKind {
			continue
		}
		if k.obj != nil {
			k.obj.Reply = reply
			continue
		}
		e, ok := k.slot.Get(k.key, h.at)
		if !ok {
			return errCorruptReservation // inserted by hold in this apply
		}
		r := h.record(k, reply)
		h.enc = r.AppendBinary(h.enc[:0])
		var err error
		if len(h.enc) > keyspace.MaxInlineState {
			// The reply's name took it past a record: an object then.
			_, err = k.slot.Insert(k.key, k.kind, h.expireAt, r.clone())
		} else {
			_, err = k.slot.SetState(e, h.enc)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (h *reserving) undo() {
	for _, k := range h.kept {
		if e, ok := k.slot.Get(k.key, h.at); ok {
			k.slot.Delete(e)
		}
	}
	h.kept = h.kept[:0]
}

// heldLimit is what a reservation keeps of check c (after evaluate, before
// commit: its next state says where the charge goes); false for a limit
// it cannot hold (a deny, which admits only requests of no cost).
func heldLimit(c *limitCheck, cost int64) (HeldLimit, bool) {
	units := cost
	if c.hasCost {
		units = c.cost
	}
	if !c.store {
		// Charged nothing (a shadow limit that would have refused, a
		// quota-mode limit outvoted): nothing to give back.
		units = 0
	}
	if c.deny || !refundable(c.kind) {
		return HeldLimit{}, false
	}
	l := HeldLimit{Charge: limiters.Charge{Key: c.key, Kind: c.kind, Units: units}, Name: c.name}
	switch c.kind {
	case keyspace.KindGCRA:
		l.Step = c.gcra.EmissionInterval()
		l.Anchor = c.word - units*l.Step // where the charge started (base)
	case keyspace.KindSlidingCounter:
		l.Anchor, l.Step, l.Limit = c.counter.Start, c.win.Window, c.win.Limit
	case keyspace.KindFixedWindow:
		l.Anchor, l.Step, l.Limit = c.fixed.Start, c.win.Window, c.win.Limit
	case keyspace.KindSlidingLog:
		l.Anchor, l.Step, l.Limit = c.log.Tail(), c.win.Window, c.win.Limit
	case keyspace.KindQuota:
		l.Anchor = c.quota.Start
	}
	return l, true
}
