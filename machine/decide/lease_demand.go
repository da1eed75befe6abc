package decide

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// LeaseDemand is what the holders of one lease bucket (RL.LEASE's domain
// and descriptor) last asked for: the bucket's limit is shared among them
// by it. A holder counts until two of its ttls after it last asked (a
// holder that stopped asking stops taking a share), so the record is as
// small as the set of holders still asking.
type LeaseDemand struct {
	// Holders, by holder name ascending (the order a share never depends
	// on, but an encoding does).
	Holders []HolderDemand
	// LastGrant is the id of the bucket's last grant (apply level 1; 0:
	// none kept). A grant's id is the later of its instant and LastGrant
	// + 1, so the ids of one bucket's grants only rise while the record
	// lasts, and once it has expired (two ttls after the last ask, after
	// every grant of the bucket ended) the next grant's instant is past
	// every id given before: a late RL.LEASE RETURN naming an old grant
	// never matches a new one.
	LastGrant int64
}

// nextGrant is the id of a grant made at now, noted as the last.
func (d *LeaseDemand) nextGrant(now int64) int64 {
	id := max(now, d.LastGrant+1)
	d.LastGrant = id
	return id
}

// HolderDemand is one holder's last ask.
type HolderDemand struct {
	Holder string
	// Want is the units it asked for (RL.SHARE: its requests a thousand
	// seconds); Until the instant (ns) its ask stops counting.
	Want, Until int64
	// Share is the rate and burst RL.SHARE last assigned it (zero: none).
	Share Share
}

// Share is a holder's assignment of a bucket's rate and burst (RL.SHARE):
// a token bucket of Burst tokens that refills PerFill every Every seconds,
// in force until Until (ns). Gen tells one assignment from the next (a
// data plane keeps its bucket while the assignment is unchanged).
type Share struct {
	Burst, PerFill, Every, Until, Gen int64
}

// inForce reports an assignment the holder may still be using at now.
func (s *Share) inForce(now int64) bool { return s.Burst > 0 && s.Until > now }

// rate is the assignment's rate in millionths of a unit a second, rounded
// down.
func (s *Share) rate() int64 { return s.PerFill * 1_000_000 / s.Every }

// MaxLeaseHolders bounds the holders of one bucket: a share among more is
// a share of nothing.
const MaxLeaseHolders = 1024

// errTooManyHolders: a new holder of a bucket that has MaxLeaseHolders.
var errTooManyHolders = errors.New("the lease bucket has 1024 holders asking already")

// errCorruptDemand: a demand record does not decode.
var errCorruptDemand = errors.New("machine: corrupt lease demand record")

// ask records holder's want, counting until until, and forgets the asks
// that stopped counting at now. holder is copied (it is a view of a
// command's arguments, which the next command overwrites).
func (d *LeaseDemand) ask(holder []byte, want, until, now int64) error {
	d.Holders = slices.DeleteFunc(d.Holders, func(h HolderDemand) bool { return h.Until <= now })
	i, found := slices.BinarySearchFunc(d.Holders, holder, func(h HolderDemand, name []byte) int {
		return strings.Compare(h.Holder, string(name)) // no copy: the compiler sees through it
	})
	if found {
		d.Holders[i].Want, d.Holders[i].Until = want, until
		return nil
	}
	if len(d.Holders) >= MaxLeaseHolders {
		return errTooManyHolders
	}
	d.Holders = slices.Insert(d.Holders, i, HolderDemand{Holder: string(holder), Want: want, Until: until})
	return nil
}

// until is when the last ask stops counting (the record's expiry).
func (d *LeaseDemand) until() int64 {
	var u int64
	for _, h := range d.Holders {
		u = max(u, h.Until)
	}
	return u
}

// share is holder's part of capacity: its want when the holders together
// want no more than capacity, else capacity × want / the wants' sum
// (proportional share: no holder gets more than it asked), in whole units
// by the largest remainders — the units rounding leaves go one each to
// the holders whose exact parts lost most, so the parts add up to
// capacity exactly, never more. Ties go by an order of the holders that
// round (an instant's count, the same on every replica) shuffles, so equal
// asks take the unit in turn. A holder not asking gets 0.
func (d *LeaseDemand) share(holder string, capacity int64, round uint64) int64 {
	var sum uint64
	at := -1
	for i, h := range d.Holders {
		sum += uint64(h.Want)
		if h.Holder == holder {
			at = i
		}
	}
	if capacity <= 0 || at < 0 || d.Holders[at].Want == 0 {
		return 0
	}
	if sum <= uint64(capacity) {
		return d.Holders[at].Want
	}
	part := func(want int64) (q, rem uint64) {
		hi, lo := bits.Mul64(uint64(capacity), uint64(want))
		return bits.Div64(hi, lo, sum) // capacity < sum: no overflow
	}
	q, rem := part(d.Holders[at].Want)
	left := uint64(capacity) // what the rounded-down parts leave
	ahead := 0               // holders before this one for a unit left
	mine := tieOrder(holder, round)
	for i, h := range d.Holders {
		qi, ri := part(h.Want)
		left -= qi
		if ri > rem || (ri == rem && i != at && tieBefore(tieOrder(h.Holder, round), i, mine, at)) {
			ahead++
		}
	}
	if uint64(ahead) < left {
		q++
	}
	return int64(q)
}

// tieOrder is holder's place among equal remainders in round: FNV-1a of
// its name mixed with the round (splitmix64's finalizer). No seed: every
// replica computes the same.
func tieOrder(holder string, round uint64) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(holder); i++ {
		h = (h ^ uint64(holder[i])) * 1099511628211
	}
	h ^= round * 0x9E3779B97F4A7C15
	h = (h ^ h>>30) * 0xBF58476D1CE4E5B9
	h = (h ^ h>>27) * 0x94D049BB133111EB
	return h ^ h>>31
}

// tieBefore reports whether the holder at i (order a) goes before the one
// at j (order b): by order, then by place.
func tieBefore(a uint64, i int, b uint64, j int) bool { return a < b || (a == b && i < j) }

// AppendBinary appends the record's encoding (snapshots, digests, moves).
func (d *LeaseDemand) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(d.Holders)))
	for _, h := range d.Holders {
		dst = appendBytes(dst, h.Holder)
		dst = binary.AppendVarint(dst, h.Want)
		dst = binary.AppendVarint(dst, h.Until)
	}
	shares := 0
	for i := range d.Holders {
		if d.Holders[i].Share != (Share{}) {
			shares++
		}
	}
	if d.LastGrant == 0 && shares == 0 {
		// A record of a log below level 1 encodes as it did.
		return dst
	}
	// After the holders: the last grant's id, then the assignments, each
	// after its holder's place.
	dst = binary.AppendUvarint(dst, uint64(d.LastGrant))
	if shares == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(shares))
	for i := range d.Holders {
		if sh := &d.Holders[i].Share; *sh != (Share{}) {
			dst = binary.AppendUvarint(dst, uint64(i))
			for _, v := range [...]int64{sh.Burst, sh.PerFill, sh.Every, sh.Until, sh.Gen} {
				dst = binary.AppendVarint(dst, v)
			}
		}
	}
	return dst
}

func decodeLeaseDemand(b []byte) (*LeaseDemand, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > MaxLeaseHolders {
		return nil, errCorruptDemand
	}
	b = b[k:]
	d := &LeaseDemand{Holders: make([]HolderDemand, 0, n)}
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, errCorruptDemand
		}
		h := HolderDemand{Holder: string(b[k : k+int(l)])}
		b = b[k+int(l):]
		var k1, k2 int
		h.Want, k1 = binary.Varint(b)
		if k1 <= 0 {
			return nil, errCorruptDemand
		}
		h.Until, k2 = binary.Varint(b[k1:])
		if k2 <= 0 || h.Want < 0 {
			return nil, errCorruptDemand
		}
		b = b[k1+k2:]
		if m := len(d.Holders); m > 0 && d.Holders[m-1].Holder >= h.Holder {
			return nil, errCorruptDemand // out of order: not one AppendBinary wrote
		}
		d.Holders = append(d.Holders, h)
	}
	if len(b) == 0 {
		return d, nil
	}
	last, k := binary.Uvarint(b)
	if k <= 0 || last > math.MaxInt64 {
		return nil, errCorruptDemand
	}
	d.LastGrant, b = int64(last), b[k:]
	if len(b) == 0 {
		return d, nil
	}
	shares, k := binary.Uvarint(b)
	if k <= 0 || shares == 0 || shares > uint64(len(d.Holders)) {
		return nil, errCorruptDemand
	}
	b = b[k:]
	next := uint64(0) // the least place the next assignment may be at
	for range shares {
		at, k := binary.Uvarint(b)
		if k <= 0 || at < next || at >= uint64(len(d.Holders)) {
			return nil, errCorruptDemand
		}
		b, next = b[k:], at+1
		sh := &d.Holders[at].Share
		for _, p := range []*int64{&sh.Burst, &sh.PerFill, &sh.Every, &sh.Until, &sh.Gen} {
			v, k := binary.Varint(b)
			if k <= 0 {
				return nil, errCorruptDemand
			}
			*p, b = v, b[k:]
		}
		if sh.Burst < 0 || sh.PerFill < 0 || sh.Every < 0 || sh.Burst > 0 && (sh.PerFill == 0 || sh.Every == 0) {
			return nil, errCorruptDemand
		}
	}
	if len(b) != 0 {
		return nil, errCorruptDemand
	}
	return d, nil
}

// clone is a copy that shares nothing with d.
func (d *LeaseDemand) clone() *LeaseDemand {
	return &LeaseDemand{Holders: slices.Clone(d.Holders), LastGrant: d.LastGrant}
}
