package conc

import "github.com/sluice-rl/sluice/limiter"

// Acquire takes a slot for request id, lasting lease nanoseconds from now,
// if fewer than limit leases are live (CONC.ACQUIRE).
//
// An id that already holds a live lease is acquired again whatever the
// count: its lease is reset to end at now + lease (even if that is sooner
// than before) and it takes no new slot, so a client may retry an acquire
// safely.
//
// The result: Limit is limit; Remaining is the free slots left after this
// call (0 when more leases are live than a lowered limit allows). When
// acquired, RetryAfter is limiter.Never and ResetAfter is lease (the time
// until this lease ends). When limited, RetryAfter is the time until enough
// leases end for one slot to be free (with limit unchanged since the leases
// were taken: until the earliest ends) and ResetAfter the time until the last
// ends. Invalid arguments leave the state untouched.
func (l *Leases) Acquire(now, limit, lease int64, id []byte) (limiter.Result, error) {
	if err := (Params{Limit: limit, Lease: lease}).Validate(); err != nil {
		return limiter.Result{}, err
	}
	if len(id) > MaxRequestIDLen {
		return limiter.Result{}, ErrRequestIDTooLong
	}
	expiry, err := expiryAt(now, lease)
	if err != nil {
		return limiter.Result{}, err
	}
	l.prune(now)
	live := int64(l.Len())
	fp := fingerprint(id)
	if i := l.find(id, fp); i >= 0 {
		l.move(i, expiry)
		return limiter.Result{
			Limit:      limit,
			Remaining:  max(limit-live, 0),
			RetryAfter: limiter.Never,
			ResetAfter: lease,
		}, nil
	}
	if live >= limit {
		// Slots free up in expiry order; one is free once live-limit+1
		// leases have ended, i.e. when the one at position live-limit ends.
		return limiter.Result{
			Limited:    true,
			Limit:      limit,
			Remaining:  0,
			RetryAfter: until(l.all()[live-limit].expiry, now),
			ResetAfter: until(l.ExpireAt(), now),
		}, nil
	}
	l.insert(id, fp, expiry)
	return limiter.Result{
		Limit:      limit,
		Remaining:  limit - live - 1,
		RetryAfter: limiter.Never,
		ResetAfter: lease,
	}, nil
}

// Release ends the lease of request id (CONC.RELEASE). It reports whether a
// live lease was held; an expired or unknown id (including one too long to
// have been acquired) gives false.
func (l *Leases) Release(now int64, id []byte) bool {
	l.prune(now)
	i := l.find(id, fingerprint(id))
	if i < 0 {
		return false
	}
	l.remove(i, i+1)
	return true
}

// Renew resets the live lease of request id to end at now + lease
// (CONC.RENEW), even if that is sooner than before. It reports false, and
// changes nothing but pruning, when the id holds no live lease. Invalid
// arguments are errors and leave the state untouched.
func (l *Leases) Renew(now int64, id []byte, lease int64) (bool, error) {
	if lease <= 0 {
		return false, ErrLeaseNotPositive
	}
	if len(id) > MaxRequestIDLen {
		return false, ErrRequestIDTooLong
	}
	expiry, err := expiryAt(now, lease)
	if err != nil {
		return false, err
	}
	l.prune(now)
	i := l.find(id, fingerprint(id))
	if i < 0 {
		return false, nil
	}
	l.move(i, expiry)
	return true, nil
}

// View describes the key at now without changing it (CONC.GET): how many
// leases are live, and the nanoseconds until the earliest and the latest of
// them end (both 0 when none is live).
func (l *Leases) View(now int64) (live int, untilNext, untilLast int64) {
	first := l.firstLive(now)
	live = l.Len() - first
	if live == 0 {
		return 0, 0, 0
	}
	return live, until(l.all()[first].expiry, now), until(l.ExpireAt(), now)
}

// Len is the number of stored leases, live or not yet pruned; for the
// keyspace's memory accounting.
func (l *Leases) Len() int {
	return len(l.buf) - l.head
}
