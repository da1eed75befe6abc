package conc

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/sluice-rl/sluice/limiter"
)

// model is the brute-force reference: a plain map of id → expiry, every
// answer recomputed from scratch by scanning it.
type model struct {
	exp map[string]int64
}

func (m *model) prune(now int64) {
	for id, e := range m.exp {
		if e <= now {
			delete(m.exp, id)
		}
	}
}

func (m *model) validate(limit, lease int64, id string, needLimit bool) error {
	switch {
	case needLimit && limit <= 0:
		return ErrLimitNotPositive
	case needLimit && limit > MaxLimit:
		return ErrLimitTooLarge
	case lease <= 0:
		return ErrLeaseNotPositive
	case len(id) > MaxRequestIDLen:
		return ErrRequestIDTooLong
	}
	return nil
}

func (m *model) acquire(now, limit, lease int64, id string) (limiter.Result, error) {
	if err := m.validate(limit, lease, id, true); err != nil {
		return limiter.Result{}, err
	}
	m.prune(now)
	live := int64(len(m.exp))
	if _, ok := m.exp[id]; ok {
		m.exp[id] = now + lease
		return limiter.Result{Limit: limit, Remaining: max(0, limit-live), RetryAfter: limiter.Never, ResetAfter: lease}, nil
	}
	if live >= limit {
		// The earliest expiry e after which fewer than limit leases remain.
		var retry, last int64
		first := true
		for _, e := range m.exp {
			later := int64(0)
			for _, f := range m.exp {
				if f > e {
					later++
				}
			}
			if later < limit && (first || e-now < retry) {
				retry, first = e-now, false
			}
			last = max(last, e-now)
		}
		return limiter.Result{Limited: true, Limit: limit, RetryAfter: retry, ResetAfter: last}, nil
	}
	m.exp[id] = now + lease
	return limiter.Result{Limit: limit, Remaining: limit - live - 1, RetryAfter: limiter.Never, ResetAfter: lease}, nil
}

func (m *model) release(now int64, id string) bool {
	m.prune(now)
	_, ok := m.exp[id]
	delete(m.exp, id)
	return ok
}

func (m *model) renew(now int64, id string, lease int64) (bool, error) {
	if err := m.validate(0, lease, id, false); err != nil {
		return false, err
	}
	m.prune(now)
	if _, ok := m.exp[id]; !ok {
		return false, nil
	}
	m.exp[id] = now + lease
	return true, nil
}

// view does not prune: it only looks.
func (m *model) view(now int64) (live int, next, last int64) {
	for _, e := range m.exp {
		if e > now {
			if live == 0 || e-now < next {
				next = e - now
			}
			last = max(last, e-now)
			live++
		}
	}
	return live, next, last
}

type traceShape struct {
	steps    int
	ids      int   // size of the request-id pool
	minLimit int64 // limits drawn from [minLimit, maxLimit]
	maxLimit int64
	maxLease int64 // leases drawn from [1, maxLease] ns
	maxStep  int64 // time advances by [0, maxStep] ns per call
}

func TestAgainstReference(t *testing.T) {
	shapes := []traceShape{
		{steps: 20_000, ids: 8, minLimit: 1, maxLimit: 5, maxLease: 30, maxStep: 4},
		{steps: 20_000, ids: 40, minLimit: 1, maxLimit: 30, maxLease: 100, maxStep: 3},
		// Crosses the index thresholds up and down.
		{steps: 30_000, ids: 300, minLimit: 10, maxLimit: 150, maxLease: 400, maxStep: 2},
	}
	for si, sh := range shapes {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("shape%d/seed%d", si, seed), func(t *testing.T) {
				runTrace(t, sh, seed)
			})
		}
	}
}

func runTrace(t *testing.T, sh traceShape, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(sh.ids)))
	var l Leases
	m := model{exp: map[string]int64{}}
	now := t0
	limit := sh.minLimit + rng.Int64N(sh.maxLimit-sh.minLimit+1)
	buf := make([]byte, 0, 16)
	for step := range sh.steps {
		now += rng.Int64N(sh.maxStep + 1)
		if rng.IntN(50) == 0 { // limits change now and then, sometimes below the live count
			limit = sh.minLimit + rng.Int64N(sh.maxLimit-sh.minLimit+1)
		}
		// Reuse one buffer for ids, as the network layer does.
		buf = fmt.Appendf(buf[:0], "req-%d", rng.IntN(sh.ids))
		ids := string(buf)
		lease := 1 + rng.Int64N(sh.maxLease)
		if rng.IntN(200) == 0 {
			lease = -rng.Int64N(2) // invalid
		}
		lim := limit
		if rng.IntN(200) == 0 {
			lim = []int64{0, -3, MaxLimit + 1}[rng.IntN(3)] // invalid
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("step %d at t0+%d: %s", step, now-t0, fmt.Sprintf(format, args...))
		}
		switch op := rng.IntN(20); {
		case op < 10:
			got, gerr := l.Acquire(now, lim, lease, buf)
			want, werr := m.acquire(now, lim, lease, ids)
			if got != want || gerr != werr {
				fail("acquire(%d, %d, %s) = %+v, %v; model %+v, %v", lim, lease, ids, got, gerr, want, werr)
			}
		case op < 15:
			got, want := l.Release(now, buf), m.release(now, ids)
			if got != want {
				fail("release(%s) = %v; model %v", ids, got, want)
			}
		case op < 18:
			got, gerr := l.Renew(now, buf, lease)
			want, werr := m.renew(now, ids, lease)
			if got != want || gerr != werr {
				fail("renew(%s, %d) = %v, %v; model %v, %v", ids, lease, got, gerr, want, werr)
			}
		default:
			// Snapshot and carry on with the decoded copy.
			d, err := DecodeLeases(l.AppendBinary(nil))
			if err != nil {
				fail("decode own encoding: %v", err)
			}
			l = d
		}
		gl, gn, gx := l.View(now)
		ml, mn, mx := m.view(now)
		if gl != ml || gn != mn || gx != mx {
			fail("view = %d %d %d; model %d %d %d", gl, gn, gx, ml, mn, mx)
		}
		if l.Empty(now) != (ml == 0) {
			fail("Empty = %v with %d live", l.Empty(now), ml)
		}
		if !maps.Equal(stored(&l), m.exp) {
			fail("stored leases %v; model %v", stored(&l), m.exp)
		}
		checkInvariants(t, &l)
	}
}
