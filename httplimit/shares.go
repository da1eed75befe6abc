package httplimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"
)

// Shares decides Rules' requests in process from a share of each
// descriptor's rate and burst (RL.SHARE), as Envoy's rate_limit_quota
// filter does with sluice's RLQS: a token bucket of the share's burst,
// refilling continuously at its rate, kept while the share is unchanged
// and made new (full) when it changes. Every report interval, off the
// request path, it charges what it admitted and asks for the rate it was
// asked for; the cluster divides the rule's rate among all the holders of
// the bucket by what they ask — Go services and Envoys alike — and the
// shares in force never add up past the rate nor the burst (README "The
// bound, RLQS").
//
// A request with no share to decide from (the first of its descriptor) is
// checked per request (RL.CHECK), and so are requests of more than one
// descriptor. While sluice does not answer, a share is used until its ttl
// and what was admitted is charged at the next report. Close charges what
// is left and releases the shares.
type Shares struct {
	inProcess[heldShare]
	every time.Duration // the report interval
}

// ShareOptions configures WithShares.
type ShareOptions struct {
	// Holder names this process to sluice (1 to 128 bytes); empty: the
	// host name, process id and a random number.
	Holder string
	// Report is how often a share is renewed, in whole seconds (default
	// 1 s, as Envoy's reporting_interval; at most an hour). A share lives
	// two of them.
	Report time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// heldShare is one descriptor's share and the bucket it fills.
type heldShare struct {
	desc []any
	// The share: a bucket of burst tokens refilling perFill every
	// `every`, in force until until; unlimited: no rule limits it. gen
	// tells one share from the next.
	burst, perFill int64
	every          time.Duration
	gen            int64
	until          time.Time
	unlimited      bool
	// The bucket: tokens at instant at (fractions count toward the next).
	tokens float64
	at     time.Time
	// Since the last report (since): units admitted here, asked for
	// (admitted, refused, or checked per request), and admitted but not
	// charged by a report that did not land.
	used, asked, unspent int64
	since                time.Time
	next                 time.Time // the next report
	reporting            bool
	// What the rules' reply said of the descriptor (for the headers).
	policy Policy
	limit  int64
	known  bool
}

// WithShares makes rules decide from shares (see Shares).
func WithShares(rules Rules, opts ShareOptions) (*Shares, error) {
	if err := rules.Validate(); err != nil {
		return nil, err
	}
	if opts.Report == 0 {
		opts.Report = time.Second
	}
	if opts.Report < time.Second || opts.Report > time.Hour || opts.Report%time.Second != 0 {
		return nil, fmt.Errorf("%w: a share's report interval must be whole seconds from 1 s to an hour", ErrInvalidLimit)
	}
	l := &Shares{every: opts.Report}
	if err := l.init(rules, opts.Holder, opts.Now); err != nil {
		return nil, err
	}
	return l, nil
}

// Validate checks the rules.
func (s *Shares) Validate() error { return s.rules.Validate() }

// Check decides from the descriptor's share when it has one in force,
// else per request; the share is renewed in the background.
func (s *Shares) Check(ctx context.Context, c Doer, r *http.Request, key string) (Decision, error) {
	h, units, now := s.enter(c, r, key, s.forgetIdle, func(desc []any, now time.Time) *heldShare { return &heldShare{desc: desc, since: now} })
	if h == nil {
		return s.rules.Check(ctx, c, r, key)
	}
	h.asked += units
	report := h.known && !h.reporting && !now.Before(h.next)
	h.reporting = h.reporting || report
	if h.known && now.Before(h.until) {
		d := s.decide(h, units, now)
		s.mu.Unlock()
		if report {
			s.reportLater(h)
		}
		return d, nil
	}
	s.mu.Unlock()
	if report {
		s.reportLater(h)
	}
	// No share to decide from: per request, and a share asked for once
	// the rules' reply says what the headers advertise.
	d, err := s.rules.Check(ctx, c, r, key)
	if err == nil && d.Policy.Quota > 0 {
		s.mu.Lock()
		first := !h.known
		if first {
			h.policy, h.limit, h.known = d.Policy, d.Limit, true
			first = !h.reporting
			h.reporting = true
		}
		s.mu.Unlock()
		if first {
			s.reportLater(h)
		}
	}
	return d, err
}

// decide takes units from h's bucket at now, or refuses them (s.mu held).
func (s *Shares) decide(h *heldShare, units int64, now time.Time) Decision {
	d := Decision{Limit: h.limit, RetryAfter: -1, ResetAfter: ceilSeconds(h.until.Sub(now)), Policy: h.policy}
	if h.unlimited {
		h.used += units
		d.Remaining = h.limit
		return d
	}
	rate := 0.0
	if h.every > 0 {
		rate = float64(h.perFill) / h.every.Seconds()
	}
	if now.After(h.at) {
		h.tokens = min(float64(h.burst), h.tokens+now.Sub(h.at).Seconds()*rate)
		h.at = now
	}
	if h.tokens >= float64(units) {
		h.tokens -= float64(units)
		h.used += units
		d.Remaining = int64(h.tokens)
		return d
	}
	d.Limited = true
	d.RetryAfter = ceilSeconds(h.until.Sub(now))
	if rate > 0 && float64(units) <= float64(h.burst) {
		d.RetryAfter = max(1, int64(math.Ceil((float64(units)-h.tokens)/rate)))
	}
	return d
}

// reportLater renews h's share off the request path.
func (s *Shares) reportLater(h *heldShare) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.report(h, false) // not answered: asked again at the next request past the interval
	}()
}

// report charges what h admitted since the last report and asks for its
// share again (release: asks for nothing, ending it).
func (s *Shares) report(h *heldShare, release bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), renewTimeout)
	defer cancel()
	s.mu.Lock()
	c, now := s.client, s.now()
	used, asked := h.unspent+h.used, h.asked
	over := max(1, int64(now.Sub(h.since)/time.Second))
	h.unspent, h.used, h.asked, h.since = used, 0, 0, now
	s.mu.Unlock()
	if release {
		asked = 0
	} else {
		asked = max(1, asked) // one at least: the next request finds a token
	}
	ttl := 2 * int64(s.every/time.Second)
	args := append([]any{"RL.SHARE", s.rules.Domain, s.holder, ttl, "USED", min(used, math.MaxUint32), "ASKED", min(asked, math.MaxUint32),
		"OVER", min(over, 86400)}, h.desc...)
	v, err := c.Do(ctx, args...).Slice()
	s.mu.Lock()
	defer s.mu.Unlock()
	h.reporting = false
	h.next = s.now().Add(s.every)
	if err == nil && len(v) != 5 {
		err = fmt.Errorf("%w: RL.SHARE answered %v", ErrBadReply, v)
	}
	if err != nil {
		// Charged at the next report (twice, if this one landed: never
		// fewer than were admitted); the share is used until its ttl.
		return err
	}
	h.unspent = used - min(used, math.MaxUint32)
	var ints [5]int64
	for i := range v {
		ints[i], _ = v[i].(int64)
	}
	burst, perFill, every, ttlMs, gen := ints[0], ints[1], ints[2], ints[3], ints[4]
	now = s.now()
	h.until = now.Add(time.Duration(ttlMs) * time.Millisecond)
	h.unlimited = burst < 0
	if gen != h.gen || burst <= 0 {
		// A new share: a new bucket, full, as Envoy makes one.
		h.tokens, h.at = float64(max(burst, 0)), now
	}
	h.burst, h.perFill, h.every, h.gen = max(burst, 0), perFill, time.Duration(every)*time.Second, gen
	return nil
}

// forgetIdle drops the descriptors whose shares ended and that are not
// being renewed, and reports whether room was made (s.mu held).
func (s *Shares) forgetIdle(now time.Time) bool {
	for name, h := range s.held {
		if !h.reporting && !now.Before(h.until) && h.unspent == 0 && h.used == 0 {
			delete(s.held, name)
		}
	}
	return len(s.held) < maxLeases
}

// Close waits for the reports on their way, then charges what every share
// admitted since its last report and releases it; afterwards every request
// is checked per request. The errors are those of the reports that did
// not land (what they would have charged was admitted uncharged).
func (s *Shares) Close(context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	var all []*heldShare
	for _, h := range s.held {
		if h.known && s.client != nil {
			all = append(all, h)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, h := range all {
		if err := s.report(h, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
