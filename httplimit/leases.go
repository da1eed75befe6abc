package httplimit

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Leases decides Rules' requests in process, from capacity sluice leases
// this process (RL.LEASE, the hybrid local + global mode): per descriptor
// it holds a lease of some units for a ttl, admits requests from it
// without a call, and in the background, at the lease's refresh time (or
// as soon as it runs out), gives back what it did not use (RL.LEASE
// RETURN) and asks for as much as the last period's requests took. Each
// lease is a charge in the cluster's log, shared among the holders of
// its bucket by what they ask, so the processes together never admit
// more than the rule allows, give or take what one lease holds.
//
// While a lease period lasts, every request of its descriptor is decided
// here: admitted from what the lease holds, refused once it is spent
// (Retry-After: until the next grant is asked for), so the calls to sluice
// do not grow with the requests. A request with no lease to decide from —
// the first of its descriptor, or one after sluice did not answer a
// renewal and the lease ended — is checked per request (RL.CHECK,
// Rules.Check) or takes the middleware's failure mode, and so are requests
// with more than one descriptor (a lease is for one bucket). The headers
// are the same as Rules' (the policy is the one the rules' reply named).
//
// Close gives back what every lease left: call it when the server stops.
type Leases struct {
	inProcess[heldLease]
	ttl int64 // seconds
	// noGrantIDs: sluice refused RL.LEASE … WITHGRANT (an older server,
	// or a group not yet upgraded), so leases are asked without, and
	// returned without naming their grants (under mu).
	noGrantIDs bool
}

// LeaseOptions configure Leases. Zero fields take their defaults.
type LeaseOptions struct {
	// Holder names this process to sluice; each process must have its own.
	// Default: the host name, the process id and a random suffix.
	Holder string
	// TTL is how long a lease is asked for, in whole seconds. Default 10 s.
	TTL time.Duration
	// Now is the clock leases run on. Default time.Now.
	Now func() time.Time
}

// heldLease is a lease of one descriptor and what happened under it.
type heldLease struct {
	desc []any // DESCRIPTOR k v …
	// granted, left: the lease's units and what is unused; until: its end;
	// refresh: when to renew it. renewing: a renewal is on its way.
	granted, left  int64
	until, refresh time.Time
	renewing       bool
	// grant is the id of the grant held (0: not known: a server or a log
	// before grant ids). returning, when set, is a return whose outcome is
	// not known (its reply was lost): sent again, naming its grant, before
	// anything else — its units are neither used here nor asked again
	// until sluice says what became of it, so a return that landed is
	// never spent twice.
	grant     int64
	returning *leaseReturn
	// asked: units requested since the lease was granted (the next ask);
	// since: when that count began.
	asked int64
	since time.Time
	// policy, limit: what the rules' reply said of the descriptor.
	policy Policy
	limit  int64
	known  bool
}

// leaseReturn is an RL.LEASE RETURN: what it gives back, of which grant.
type leaseReturn struct{ unused, grant int64 }

// ErrLeasesClosed: a Leases after Close decides per request only.
var ErrLeasesClosed = errors.New("httplimit: leases closed")

// WithLeases makes rules decide from leases (see Leases).
func WithLeases(rules Rules, opts LeaseOptions) (*Leases, error) {
	if err := rules.Validate(); err != nil {
		return nil, err
	}
	if opts.TTL == 0 {
		opts.TTL = 10 * time.Second
	}
	ttl, err := wholeSeconds("lease ttl", opts.TTL)
	if err != nil {
		return nil, err
	}
	if ttl < 1 || ttl > 86400 {
		return nil, fmt.Errorf("%w: lease ttl must be 1 s to a day", ErrInvalidLimit)
	}
	l := &Leases{ttl: ttl}
	if err := l.init(rules, opts.Holder, opts.Now); err != nil {
		return nil, err
	}
	return l, nil
}

// Validate checks the rules.
func (l *Leases) Validate() error { return l.rules.Validate() }

// Check decides from the descriptor's lease when it holds units, else
// per request; a lease missing or spent is asked for in the background.
func (l *Leases) Check(ctx context.Context, c Doer, r *http.Request, key string) (Decision, error) {
	h, units, now := l.enter(c, r, key, l.forgetIdle, func(desc []any, now time.Time) *heldLease { return &heldLease{desc: desc, since: now} })
	if h == nil {
		return l.rules.Check(ctx, c, r, key)
	}
	h.asked += units
	if h.known && now.Before(h.until) {
		// A lease period: decided here. What the lease holds is admitted;
		// once it is spent the request is refused until a new grant comes
		// — asked for at once when the last one granted something, else at
		// its refresh time (a bucket that has nothing to share now is not
		// asked on every request).
		d := Decision{Limit: h.limit, Remaining: h.left - units, RetryAfter: -1, ResetAfter: ceilSeconds(h.until.Sub(now)), Policy: h.policy}
		if h.left >= units {
			h.left -= units
		} else {
			d.Limited, d.Remaining, d.RetryAfter = true, 0, max(1, ceilSeconds(h.refresh.Sub(now)))
		}
		renew := !h.renewing && ((h.left < units && h.granted > 0) || !now.Before(h.refresh))
		h.renewing = h.renewing || renew
		l.mu.Unlock()
		if renew {
			l.renewLater(h)
		}
		return d, nil
	}
	// None held (the first request of a descriptor, or sluice did not
	// answer a renewal): checked per request, and a lease asked for.
	renew := !h.renewing && h.known && !now.Before(h.refresh)
	h.renewing = h.renewing || renew
	l.mu.Unlock()
	if renew {
		l.renewLater(h)
	}
	d, err := l.rules.Check(ctx, c, r, key)
	if err == nil && d.Policy.Quota > 0 {
		l.mu.Lock()
		if !h.known {
			// The rules' reply says what the headers advertise; the lease
			// is asked for once that is known.
			h.policy, h.limit, h.known = d.Policy, d.Limit, true
			if !h.renewing {
				h.renewing = true
				l.mu.Unlock()
				l.renewLater(h)
				return d, nil
			}
		}
		l.mu.Unlock()
	}
	return d, err
}

// maxLeases bounds the descriptors a Leases keeps: its memory is bounded
// whatever the requests; past it, a new descriptor is checked per request.
const maxLeases = 10000

// forgetIdle drops the descriptors whose leases ended and that are not
// being renewed (their charge stays in sluice: nothing to give back), and
// reports whether room was made. l.mu is held.
func (l *Leases) forgetIdle(now time.Time) bool {
	for name, h := range l.held {
		if !h.renewing && !now.Before(h.until) {
			delete(l.held, name)
		}
	}
	return len(l.held) < maxLeases
}

// descriptorName is a descriptor's entries as one string, each part
// length-prefixed (no two descriptors alike).
func descriptorName(d []Entry) string {
	n := 0
	for _, e := range d {
		n += len(e.Key) + len(e.Value) + 8
	}
	b := make([]byte, 0, n)
	for _, e := range d {
		b = strconv.AppendInt(b, int64(len(e.Key)), 10)
		b = append(b, ':')
		b = append(b, e.Key...)
		b = strconv.AppendInt(b, int64(len(e.Value)), 10)
		b = append(b, ':')
		b = append(b, e.Value...)
	}
	return string(b)
}

func ceilSeconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// renewLater renews h off the request path.
func (l *Leases) renewLater(h *heldLease) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.renew(h)
	}()
}

// renewTimeout bounds one renewal's calls.
const renewTimeout = 2 * time.Second

// renew gives back what h's lease left and asks for a new one, sized by
// the rate its units were asked for since the last. Requests start it
// (Check): at the lease's refresh time, or once a grant is spent.
func (l *Leases) renew(h *heldLease) {
	ctx, cancel := context.WithTimeout(context.Background(), renewTimeout)
	defer cancel()
	l.mu.Lock()
	c, now := l.client, l.now()
	ret, again := h.returning, h.returning != nil
	if ret == nil && now.Before(h.until) && h.granted > 0 {
		ret = &leaseReturn{unused: h.left, grant: h.grant}
		h.left = 0 // what is given back is no longer this process's to use
	}
	h.returning = ret
	want := wantFor(h.asked, now.Sub(h.since), l.ttl)
	l.mu.Unlock()
	if ret != nil {
		if err := l.giveBack(ctx, c, h, ret); err != nil {
			l.mu.Lock()
			if !again && notSent(err) {
				// It never left this process: what the lease left is
				// still this process's to use.
				h.left += ret.unused
				h.returning = nil
			}
			l.mu.Unlock()
			l.doneRenewing(h)
			return
		}
		l.mu.Lock()
		h.returning = nil
		l.mu.Unlock()
	}
	v, err := l.lease(ctx, c, h, want)
	if err != nil || len(v) < 3 {
		l.doneRenewing(h)
		return
	}
	granted, _ := v[0].(int64)
	ttl, _ := v[1].(int64)
	refresh, _ := v[2].(int64)
	var grant int64
	if len(v) > 3 {
		grant, _ = v[3].(int64)
	}
	l.mu.Lock()
	now = l.now()
	h.granted, h.left, h.grant = granted, granted, grant
	h.until = now.Add(time.Duration(ttl) * time.Millisecond)
	h.refresh = now.Add(time.Duration(refresh) * time.Millisecond)
	h.asked, h.since = 0, now
	h.renewing = false
	l.mu.Unlock()
}

// wantFor is what to ask for a lease of ttl seconds: the units asked for
// over the period elapsed, at that rate for the ttl (at least the units
// asked), at most what RL.LEASE takes.
func wantFor(asked int64, elapsed time.Duration, ttl int64) int64 {
	if asked <= 0 {
		return 0
	}
	const most = 4294967295
	asked = min(asked, most)
	elapsed = max(elapsed, time.Millisecond)
	hi, lo := bits.Mul64(uint64(asked)*uint64(ttl), uint64(time.Second)) // asked × ttl < 2^49
	if hi >= uint64(elapsed) {
		return most // the quotient would not fit: far more than RL.LEASE takes
	}
	q, _ := bits.Div64(hi, lo, uint64(elapsed))
	return int64(min(max(q, uint64(asked)), most))
}

// lease asks for a lease of want units of h's bucket, naming its grant
// (WITHGRANT) unless sluice has refused to: a server before grant ids, or
// a group whose log is not yet at their level, is asked without.
func (l *Leases) lease(ctx context.Context, c Doer, h *heldLease, want int64) ([]any, error) {
	l.mu.Lock()
	withGrant := !l.noGrantIDs
	l.mu.Unlock()
	if withGrant {
		args := append([]any{"RL.LEASE", l.rules.Domain, l.holder, l.ttl, "WANT", want, "WITHGRANT"}, h.desc...)
		v, err := c.Do(ctx, args...).Slice()
		var refused redis.Error
		if !errors.As(err, &refused) {
			return v, err
		}
		l.mu.Lock()
		l.noGrantIDs = true
		l.mu.Unlock()
	}
	args := append([]any{"RL.LEASE", l.rules.Domain, l.holder, l.ttl, "WANT", want}, h.desc...)
	return c.Do(ctx, args...).Slice()
}

// giveBack returns what a lease did not use (RL.LEASE RETURN), naming its
// grant when it is known: a copy that lands late, after the next grant,
// ends nothing. A lease sluice no longer holds (nil) is no error.
func (l *Leases) giveBack(ctx context.Context, c Doer, h *heldLease, ret *leaseReturn) error {
	args := []any{"RL.LEASE", "RETURN", l.rules.Domain, l.holder, "UNUSED", ret.unused}
	if ret.grant > 0 {
		args = append(args, "GRANT", ret.grant)
	}
	if err := c.Do(ctx, append(args, h.desc...)...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return nil
}

// notSent reports an error that says the call never left this process
// (no connection could be made), so it cannot have been applied.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" || errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed)
}

func (l *Leases) doneRenewing(h *heldLease) {
	l.mu.Lock()
	h.renewing = false
	l.mu.Unlock()
}

// Close waits for the renewals on their way and gives back what every
// lease left; afterwards every request is checked per request.
func (l *Leases) Close(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wg.Wait()
	l.mu.Lock()
	c := l.client
	type left struct {
		h   *heldLease
		ret *leaseReturn
	}
	var back []left
	now := l.now()
	for _, h := range l.held {
		switch {
		case h.returning != nil:
			back = append(back, left{h, h.returning})
		case h.granted > 0 && now.Before(h.until):
			back = append(back, left{h, &leaseReturn{unused: h.left, grant: h.grant}})
			h.left = 0
		}
	}
	l.mu.Unlock()
	var errs []error
	for _, b := range back {
		if err := l.giveBack(ctx, c, b.h, b.ret); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
