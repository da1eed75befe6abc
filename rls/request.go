package rls

import (
	"errors"
	"fmt"
	"strconv"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluice-rl/sluice/policy"
)

// ErrInvalid is a request the service refuses as INVALID_ARGUMENT; it
// charges nothing.
var ErrInvalid = errors.New("rls: invalid request")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// overrideUnits maps Envoy's RateLimitUnit to the unit
// RL.SHOULDRATELIMIT takes (by its word).
var overrideUnits = map[typev3.RateLimitUnit]policy.Unit{
	typev3.RateLimitUnit_SECOND: policy.Second, typev3.RateLimitUnit_MINUTE: policy.Minute, typev3.RateLimitUnit_HOUR: policy.Hour,
	typev3.RateLimitUnit_DAY: policy.Day, typev3.RateLimitUnit_MONTH: policy.Month, typev3.RateLimitUnit_YEAR: policy.Year,
}

// maxUint32 bounds hits and requests_per_unit (the machine's range).
const maxUint32 = 1<<32 - 1

// check refuses what the service will not decide: an empty domain, no
// descriptors, a descriptor with no entries, an entry with an empty key,
// more descriptors or entries than the limits, oversized keys or values,
// a limit's unit sluice does not know and a unit_multiplier of 0 (Envoy's
// own validation refuses it too).
func (l Limits) check(req *pb.RateLimitRequest) error {
	switch {
	case req.GetDomain() == "":
		return invalid("rate limit domain must not be empty")
	case len(req.Domain) > l.DomainBytes:
		return invalid("domain is %d bytes, more than %d", len(req.Domain), l.DomainBytes)
	case len(req.GetDescriptors()) == 0:
		return invalid("rate limit descriptor list must not be empty")
	case len(req.Descriptors) > l.Descriptors:
		return invalid("%d descriptors, more than %d", len(req.Descriptors), l.Descriptors)
	}
	entries := 0
	for i, d := range req.Descriptors {
		if len(d.GetEntries()) == 0 {
			return invalid("descriptor %d has no entries", i)
		}
		entries += len(d.Entries)
		if entries > l.Entries {
			return invalid("more than %d descriptor entries in one request", l.Entries)
		}
		for j, e := range d.Entries {
			switch {
			case e.GetKey() == "":
				return invalid("descriptor %d, entry %d: the key must not be empty", i, j)
			case len(e.Key) > l.KeyBytes:
				return invalid("descriptor %d, entry %d: the key is %d bytes, more than %d", i, j, len(e.Key), l.KeyBytes)
			case len(e.GetValue()) > l.ValueBytes:
				return invalid("descriptor %d, entry %d: the value is %d bytes, more than %d", i, j, len(e.Value), l.ValueBytes)
			}
		}
		if h := d.GetHitsAddend(); h != nil && h.GetValue() > maxUint32 {
			return invalid("descriptor %d: hits_addend %d is more than %d", i, h.GetValue(), uint64(maxUint32))
		}
		if o := d.GetLimit(); o != nil {
			if _, ok := overrideUnits[o.GetUnit()]; !ok {
				return invalid("descriptor %d: limit unit %s is not one of SECOND, MINUTE, HOUR, DAY, MONTH, YEAR", i, o.GetUnit())
			}
			if m := o.GetUnitMultiplier(); m != nil && m.GetValue() == 0 {
				return invalid("descriptor %d: limit unit_multiplier must be greater than 0", i)
			} else if u := overrideUnits[o.GetUnit()]; m != nil && int64(m.GetValue()) > u.MaxMultiplier() {
				return invalid("descriptor %d: a window of %d %s is longer than 292 years", i, m.GetValue(), u)
			}
		}
	}
	return nil
}

// commandArgs is the RL.SHOULDRATELIMIT a checked request becomes, its
// words written back to back into a.buf and sliced by a.args (both reused
// from call to call: a request costs no allocation once they have grown).
func commandArgs(req *pb.RateLimitRequest, a *argBuf) [][]byte {
	a.buf, a.ends = a.buf[:0], a.ends[:0]
	text := func(s string) { a.buf = append(a.buf, s...); a.ends = append(a.ends, len(a.buf)) }
	num := func(n uint64) { a.buf = strconv.AppendUint(a.buf, n, 10); a.ends = append(a.ends, len(a.buf)) }
	text("RL.SHOULDRATELIMIT")
	text(req.Domain)
	num(uint64(req.HitsAddend))
	for _, d := range req.Descriptors {
		num(uint64(len(d.Entries)))
		switch h := d.GetHitsAddend(); {
		case d.GetIsNegativeHits():
			// A refund (is_negative_hits): the descriptor's hits, else the
			// request's (0 means 1), given back as "-N".
			n := uint64(max(req.HitsAddend, 1))
			if h != nil {
				n = h.GetValue()
			}
			if n == 0 {
				text("0") // nothing to give back
			} else {
				a.buf = append(a.buf, '-')
				num(n)
			}
		case h != nil:
			num(h.GetValue())
		default:
			text("-")
		}
		if o := d.GetLimit(); o != nil {
			num(uint64(o.GetRequestsPerUnit()))
			if m := o.GetUnitMultiplier().GetValue(); m > 1 {
				// A window of m units: <unit>*<m>.
				a.buf = append(a.buf, overrideUnits[o.GetUnit()].String()...)
				a.buf = append(a.buf, '*')
				num(uint64(m))
			} else {
				text(overrideUnits[o.GetUnit()].String())
			}
		} else {
			text("-")
			text("-")
		}
		for _, e := range d.Entries {
			text(e.Key)
			text(e.Value)
		}
	}
	a.args = a.args[:0]
	from := 0
	for _, end := range a.ends {
		a.args = append(a.args, a.buf[from:end:end])
		from = end
	}
	return a.args
}

// argBuf is the storage commandArgs reuses (Service.args pools them).
type argBuf struct {
	buf  []byte
	ends []int
	args [][]byte
}
