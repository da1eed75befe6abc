package decide

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// RL.LEASE: capacity handed to an edge to decide with locally (hybrid
// local + global). A lease is a reservation held by a named holder for a
// bucket — a domain and one descriptor — so granting charges the bucket's
// limits through the log like any check (a new leader knows every grant
// outstanding), a lease that expires keeps its charge, and what a holder
// returns unused is given back with the reservations' exact, never-lax
// refunds (RL.SETTLE). The holders asking for a bucket share its limit by
// what they ask (LeaseDemand): proportionally once they ask for more than
// it holds, never more than a holder asked, never more than the limit
// admits at the grant.
//
// A lease's records are kept in its counter's slot (the first limit's),
// so the group that owns the counter decides the lease, and the records
// move with the counter when its slot migrates: the grant, a reservation
// under an id no client can name (it begins with a NUL byte, which
// RL.RESERVE refuses), and the bucket's demand. A cluster client routes
// RL.LEASE by its domain; a member of another group answers MOVED to the
// counter's slot (Command.RouteKey), which the counter's owner takes.

func (m *Room) leaseCommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "rl.lease", Arity: -9, Flags: []string{"write", "denyoom"},
			FirstKey: 1, LastKey: 1, Step: 1, Group: "sluice", Since: "1.4.0", Complexity: "O(D + H) where D is the number of descriptor entries and H the holders of the bucket",
			Summary: "Leases units of a bucket's limit to a holder for ttl seconds, to decide with locally: replies [granted, ttl_ms, refresh_ms] (and with WITHGRANT the grant's id), charged now and shared among the bucket's holders by what they ask; the same holder and bucket again while held replies the current grant. RL.LEASE RETURN <domain> <holder> UNUSED <n> [GRANT <id>] DESCRIPTOR … gives back what was not used (RL.SETTLE's reply, nil when nothing is held, or a grant other than the one named).",
			Args: []cmdspec.Arg{
				{Name: "domain", Type: "key"}, {Name: "holder", Type: "string"}, {Name: "ttl-seconds", Type: "integer"},
				{Name: "want", Type: "integer", Token: "WANT"},
				{Name: "withgrant", Type: "pure-token", Token: "WITHGRANT", Optional: true},
				{Name: "descriptor", Type: "block", Token: "DESCRIPTOR", Sub: []cmdspec.Arg{
					{Name: "entry", Type: "block", Multiple: true, Sub: []cmdspec.Arg{{Name: "key", Type: "string"}, {Name: "value", Type: "string"}}},
				}},
			}}, Decides: true, Stores: leaseStores, Slots: room.AllSlots, Keys: leaseKeys,
		Run: m.run(runLease), Check: m.check(checkLease), Route: m.leaseRouteKey,
	}}
}

// leaseKeys is the domain's place: after RETURN in a return.
func leaseKeys(args [][]byte) []int {
	if isLeaseReturn(args) {
		return []int{2}
	}
	return []int{1}
}

// isLeaseReturn reports RL.LEASE RETURN <domain> <holder> UNUSED …
func isLeaseReturn(args [][]byte) bool {
	return len(args) > 4 && resp.EqualFold(args[1], "return") && resp.EqualFold(args[4], "unused")
}

// maxHolder bounds a holder's name, in bytes.
const maxHolder = 128

// leaseRequest is an RL.LEASE as parsed.
type leaseRequest struct {
	ret            bool
	domain, holder []byte
	// ttl is the lease's, in ns (a return has none); n is WANT, or
	// RETURN's UNUSED.
	ttl, n int64
	// withGrant: the reply names the grant (WITHGRANT). grant is the
	// grant a return names (GRANT <id>; 0: whichever is held).
	withGrant bool
	grant     int64
	// desc is the descriptor, from DESCRIPTOR on.
	desc [][]byte
}

// leaseSyntax is RL.LEASE's syntax, for a refusal.
const leaseSyntax = "ERR syntax error: RL.LEASE <domain> <holder> <ttl-seconds> WANT <n> [WITHGRANT] DESCRIPTOR <key> <value> … or RL.LEASE RETURN <domain> <holder> UNUSED <n> [GRANT <id>] DESCRIPTOR …"

// errGrantLevel refuses WITHGRANT and GRANT in a log below level 1.
const errGrantLevel = "ERR a lease's grant id (WITHGRANT, GRANT) needs every member of the group at sluice 0.5.0 or later (apply level 1); try again once the group is upgraded"

func parseLease(args [][]byte) (leaseRequest, string) {
	var r leaseRequest
	if len(args) < 9 {
		return r, "ERR wrong number of arguments for 'rl.lease' command"
	}
	r.ret = isLeaseReturn(args)
	word := "WANT"
	if r.ret {
		r.domain, r.holder, word = args[2], args[3], "UNUSED"
	} else {
		r.domain, r.holder = args[1], args[2]
		n, ok := resp.ParseInt(args[3])
		if !ok || n < 1 || n > maxReserveTTL {
			return r, "ERR ttl-seconds must be an integer in [1, 86400]"
		}
		r.ttl = n * 1_000_000_000
		if !resp.EqualFold(args[4], "want") {
			return r, leaseSyntax
		}
	}
	if len(r.holder) == 0 || len(r.holder) > maxHolder {
		return r, "ERR a holder must be 1 to 128 bytes"
	}
	n, ok := resp.ParseInt(args[5])
	least := int64(1)
	if r.ret {
		least = 0
	}
	if !ok || n < least || n > maxRLSValue {
		if r.ret {
			return r, "ERR UNUSED must be an integer in [0, 4294967295]"
		}
		return r, "ERR WANT must be an integer in [1, 4294967295]"
	}
	r.n, r.desc = n, args[6:]
	switch {
	case !r.ret && resp.EqualFold(r.desc[0], "withgrant"):
		r.withGrant, r.desc = true, r.desc[1:]
	case r.ret && resp.EqualFold(r.desc[0], "grant"):
		id, ok := resp.ParseInt(r.desc[1])
		if !ok || id < 1 {
			return r, "ERR GRANT must be a grant id (a positive integer, the fourth element of RL.LEASE … WITHGRANT's reply)"
		}
		r.grant, r.desc = id, r.desc[2:]
	}
	if len(r.desc) == 0 || !resp.EqualFold(r.desc[0], "descriptor") {
		if r.ret {
			return r, "ERR syntax error: expected UNUSED <n> [GRANT <id>] DESCRIPTOR <key> <value> [<key> <value> ...]"
		}
		return r, "ERR syntax error: expected " + word + " <n> [WITHGRANT] DESCRIPTOR <key> <value> [<key> <value> ...]"
	}
	return r, boundLeaseDescriptor(r.desc)
}

// boundLeaseDescriptor refuses a lease's (or a share's) descriptor,
// DESCRIPTOR on, with an entry past the bounds: its bucket is held as
// long as its holders renew it, so its entries are bounded as the gRPC
// door's and RLQS's are.
func boundLeaseDescriptor(desc [][]byte) string {
	for i := 1; i+1 < len(desc); i += 2 {
		switch k, v := desc[i], desc[i+1]; {
		case len(k) > MaxLeaseKeyBytes:
			return "ERR a lease's descriptor key is " + strconv.Itoa(len(k)) + " bytes, more than " + strconv.Itoa(MaxLeaseKeyBytes)
		case len(v) > MaxLeaseValueBytes:
			return "ERR a lease's descriptor value is " + strconv.Itoa(len(v)) + " bytes, more than " + strconv.Itoa(MaxLeaseValueBytes)
		}
	}
	return ""
}

// MaxLeaseKeyBytes and MaxLeaseValueBytes bound an RL.LEASE descriptor's
// entries, as the gRPC door bounds a descriptor's by default.
const (
	MaxLeaseKeyBytes   = 1024
	MaxLeaseValueBytes = 4096
)

// parseLeaseDescriptor reads the lease's one descriptor into p.
func parseLeaseDescriptor(r *leaseRequest, p *plan) string {
	if bad := parseDescriptors(r.desc, p); bad != "" {
		return bad
	}
	if len(p.bounds) != 1 {
		return "ERR a lease is for one bucket: give one DESCRIPTOR"
	}
	return ""
}

func checkLease(m *Room, args [][]byte) string {
	r, bad := parseLease(args)
	if bad != "" {
		return bad
	}
	p := m.plan()
	defer m.release(p)
	return parseLeaseDescriptor(&r, p)
}

func runLease(x *apply, args [][]byte) {
	r, bad := parseLease(args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	if (r.withGrant || r.grant != 0) && !x.At(1) {
		x.Fail(errGrantLevel)
		return
	}
	if r.ret {
		returnLease(x, &r)
		return
	}
	lease(x, &r)
}

// leaseBucket is the bucket's name: a hash of its descriptor's entries,
// length-prefixed so no two descriptors run together alike.
func leaseBucket(desc [][]byte) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, b := range desc[1:] {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// appendLeaseID appends the reservation id holder's lease of bucket is
// held under: it begins with a NUL byte, which no RL.RESERVE id may.
func appendLeaseID(dst, holder []byte, bucket string) []byte {
	dst = append(dst, "\x00lease:"...)
	dst = append(dst, bucket...)
	dst = append(dst, ':')
	return append(dst, holder...)
}

// appendLeaseKey appends the key of a lease record of kind ("grant",
// "demand") for domain and name in slot s: "rl-lease:{<tag of s>}", the
// kind, the domain length-prefixed (no two domains' keys alike), name.
func appendLeaseKey(dst []byte, s int, kind, domain string, name []byte) []byte {
	tag := slot.Tag(s)
	dst = append(dst, "rl-lease:{"...)
	dst = append(dst, tag[:]...)
	dst = append(dst, '}')
	dst = append(dst, kind...)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, int64(len(domain)), 10)
	dst = append(dst, ':')
	dst = append(dst, domain...)
	dst = append(dst, '/')
	return append(dst, name...)
}

// planLease plans a lease's one descriptor with the domain's rules.
func (m *Room) planLease(p *plan, r *leaseRequest) string {
	if bad := parseLeaseDescriptor(r, p); bad != "" {
		return bad
	}
	domain := view(r.domain)
	p.forDomain(domain, m.policyRecords.Load())
	if d := m.rules().Domain(domain); d != nil {
		p.addMatched(d)
	}
	p.seal()
	return ""
}

// leaseRouteKey is the key an RL.LEASE is routed by: its counter's (the
// group that owns it decides), or its domain when nothing limits it or it
// does not parse (the apply then says why).
func (m *Room) leaseRouteKey(args [][]byte) []byte {
	r, bad := parseLease(args)
	if bad != "" {
		return nil
	}
	p := m.plan()
	defer m.release(p)
	if m.planLease(p, &r) != "" || len(p.checks) == 0 {
		return nil
	}
	return bytes.Clone(p.checks[0].key)
}

// refreshOf is when a holder of a lease that ends in ttl should ask
// again: at four fifths of it, so the next grant comes before this one
// ends.
func refreshOf(ttl int64) int64 { return ttl / 5 * 4 }

// lease decides an RL.LEASE: records the holder's ask, and grants what
// its share, the ask and the limits now allow — charged as a reservation
// under the holder's lease id — unless it holds a lease of the bucket
// already (then that).
func lease(x *apply, r *leaseRequest) {
	p := x.m.plan()
	defer x.m.release(p)
	if bad := x.m.planLease(p, r); bad != "" {
		x.Fail(bad)
		return
	}
	res := room.LeaseResult{TTL: r.ttl, Refresh: refreshOf(r.ttl)}
	if len(p.checks) == 0 {
		res.Granted, res.Unlimited = r.n, true
		x.answerLease(res, r.withGrant)
		return
	}
	for i := range p.checks {
		if c := &p.checks[i]; c.deny && !c.shadow {
			res.Denied = true
			x.answerLease(res, r.withGrant)
			return
		}
	}
	domain := view(r.domain)
	bucket := leaseBucket(r.desc)
	at := slot.Of(p.checks[0].key)
	// The records' keys go after the plan's (see reserve).
	start := len(p.keys)
	p.keys = appendLeaseID(p.keys, r.holder, bucket)
	id := p.keys[start:len(p.keys):len(p.keys)]
	start = len(p.keys)
	p.keys = appendLeaseKey(p.keys, at, "grant", domain, id)
	headKey := p.keys[start:len(p.keys):len(p.keys)]
	start = len(p.keys)
	p.keys = appendLeaseKey(p.keys, at, "demand", domain, []byte(bucket))
	demandKey := p.keys[start:len(p.keys):len(p.keys)]
	if err := x.m.fenceSlot(at); err != nil {
		x.Error(err)
		return
	}
	// dom is the domain's slot when the domain keeps overrides or a
	// scale there (nil otherwise): the limits in force are read from it.
	now, dom, took, err := x.lockPlan(p)
	if err != nil {
		x.Error(err)
		return
	}
	defer x.ReleaseGroup(&p.locks, took)
	// The counter's slot, which lockPlan holds: the records are there.
	ds, _ := x.LockSlot(at)
	demand, err := demandAt(ds, demandKey, now)
	if err != nil {
		x.Error(err)
		return
	}
	if err := demand.ask(r.holder, r.n, now+2*r.ttl, now); err != nil {
		x.Error(err)
		return
	}
	if e, ok := ds.Get(headKey, now); ok {
		held, err := reservationAt(ds, headKey, x.grantKind(ds, headKey, now), now)
		if err != nil {
			x.Error(err)
			return
		}
		left := ds.ExpireAt(e) - now // before the store, which may move e
		if err := storeDemand(ds, demandKey, demand); err != nil {
			x.Error(err)
			return
		}
		x.answerLease(room.LeaseResult{Granted: held.Reply.Limit, TTL: left, Refresh: refreshOf(left), Grant: grantID(held)}, r.withGrant)
		return
	}
	if !x.At(1) {
		// Before level 1 a lease read the scale and overrides from its
		// counter's slot, not the domain's (levels).
		dom = ds
	}
	x.adjustLimits(p, now, dom)
	capacity, left, err := peekLimits(x, now, p.checks)
	if err != nil {
		x.Error(err)
		return
	}
	// The round: the lease's ttl periods since the epoch — equal asks take
	// the unit rounding leaves in turn, from one period to the next.
	grant := min(r.n, demand.share(view(r.holder), capacity, uint64(now/r.ttl)), left)
	if grant > 0 {
		h := reservingOf(p)
		h.start(domain, id, now, r.ttl, grant, nil)
		h.headKey, h.headSlot, h.headKind = headKey, ds, x.grantKind(ds, headKey, now)
		if x.At(1) {
			// The grant's id, kept in its record (see grantID).
			res.Grant = demand.nextGrant(now)
			h.args = uint64(res.Grant)
		}
		h.split = x.m.placement.Owned() != nil
		_, refused, err := multiCheck(x, now, grant, p.checks, h)
		if err != nil {
			x.Error(err)
			return
		}
		if refused {
			grant, res.Grant = 0, 0 // a quota-mode pair that refuses together: nothing held
		} else if err := h.keep(room.CheckResult{Limit: grant, Remaining: -1, RetryAfter: -1}); err != nil {
			x.Error(err)
			return
		}
	}
	if err := storeDemand(ds, demandKey, demand); err != nil {
		x.Error(err)
		return
	}
	res.Granted = grant
	x.answerLease(res, r.withGrant)
}

// peekLimits evaluates every limit at a cost of nothing: the least any
// limit that can refuse holds in all (its capacity), and the least it
// would admit now.
func peekLimits(x *apply, now int64, checks []limitCheck) (capacity, left int64, err error) {
	capacity, left = -1, -1
	for i := range checks {
		c := &checks[i]
		if err := c.evaluate(x.m, c.slot, now, 0, lastStoring(checks, i), x.bufs.logScratch(i)); err != nil {
			return 0, 0, err
		}
		if c.shadow || c.res.Limit < 0 {
			continue
		}
		if capacity < 0 || c.res.Limit < capacity {
			capacity = c.res.Limit
		}
		if left < 0 || c.res.Remaining < left {
			left = c.res.Remaining
		}
	}
	if capacity < 0 { // only shadow limits: nothing refuses
		capacity, left = maxRLSValue, maxRLSValue
	}
	return capacity, max(left, 0), nil
}

// demandAt is a copy of the bucket's demand at key (empty when none).
func demandAt(s *keyspace.Slot, key []byte, now int64) (*LeaseDemand, error) {
	e, found, err := s.GetKind(key, keyspace.KindLeaseDemand, now)
	if err != nil || !found {
		return &LeaseDemand{}, err
	}
	d, ok := s.Object(e).(*LeaseDemand)
	if !ok || d == nil {
		return nil, errCorruptDemand
	}
	return d.clone(), nil
}

// storeDemand keeps d at key until its last ask stops counting.
func storeDemand(s *keyspace.Slot, key []byte, d *LeaseDemand) error {
	_, err := s.Insert(key, keyspace.KindLeaseDemand, d.until(), d)
	return err
}

// answerLease answers r: [granted, ttl_ms, refresh_ms], and with
// withGrant the grant's id (0: nothing held) after them.
func (x *apply) answerLease(r room.LeaseResult, withGrant bool) {
	x.out.Lease, x.out.Leased = r, true
	x.out.Limited = r.Granted == 0 && !r.Unlimited
	if withGrant {
		x.w.Array(4)
	} else {
		x.w.Array(3)
	}
	x.w.Int(r.Granted)
	x.w.Int(r.TTL / 1_000_000)
	x.w.Int(r.Refresh / 1_000_000)
	if withGrant {
		x.w.Int(r.Grant)
	}
}

// grantID is the id of the grant held (0: made below level 1, which kept
// none). A grant's record keeps it where a reservation's keeps its
// arguments' sum (ReservationState.Args): a grant has no arguments to
// tell apart.
func grantID(held *ReservationState) int64 {
	if held == nil {
		return 0
	}
	return int64(held.Args)
}

// returnLease is RL.LEASE RETURN: the holder's lease of the bucket is
// settled at what it used (granted − unused), each limit given back
// exactly what was not used.
func returnLease(x *apply, r *leaseRequest) {
	p := x.m.plan()
	defer x.m.release(p)
	if bad := x.m.planLease(p, r); bad != "" {
		x.Fail(bad)
		return
	}
	if len(p.checks) == 0 {
		x.w.Null() // nothing limits the bucket: no lease is held
		return
	}
	id := appendLeaseID(nil, r.holder, leaseBucket(r.desc))
	head := appendLeaseKey(nil, slot.Of(p.checks[0].key), "grant", view(r.domain), id)
	settle(x, settling{domain: r.domain, id: id, headKey: head, unused: r.n, grant: r.grant, mode: settleReturn, head: true})
}

// leaseStores is RL.LEASE's stores: a holder's lease and the bucket's
// demand; a return frees.
func leaseStores(_ room.View, args [][]byte, _ int64) bool {
	return len(args) < 2 || !resp.EqualFold(args[1], "return")
}
