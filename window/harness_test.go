package window

import (
	"math/rand/v2"

	"github.com/sluice-rl/sluice/limiter"
)

// checker is what the three state types have in common.
type checker[S any] interface {
	Check(exists bool, now int64, p Params, cost int64) (S, bool, int64, limiter.Result, error)
	AppendBinary(dst []byte) []byte
}

// key plays the keyspace for one key: it stores a state only when told to
// and deletes it, lazily on access, once now reaches its expiry instant.
type key[S checker[S]] struct {
	s        S
	exists   bool
	expireAt int64
}

// expiresBy reports whether the keyspace would have deleted the key by now.
func (k *key[S]) expiresBy(now int64) bool { return k.exists && now >= k.expireAt }

func (k *key[S]) current(now int64) (S, bool) {
	if k.expiresBy(now) {
		var zero S
		return zero, false
	}
	return k.s, k.exists
}

// probe answers a check at now without storing anything.
func (k *key[S]) probe(now int64, p Params, cost int64) (refOutcome, error) {
	s, exists := k.current(now)
	_, store, exp, res, err := s.Check(exists, now, p, cost)
	return refOutcome{res, store, exp}, err
}

func (k *key[S]) check(now int64, p Params, cost int64) (refOutcome, error) {
	s, exists := k.current(now)
	next, store, exp, res, err := s.Check(exists, now, p, cost)
	k.s, k.exists = s, exists
	if store {
		k.s, k.exists, k.expireAt = next, true, exp
	}
	return refOutcome{res, store, exp}, err
}

// request is one step of a trace.
type request struct{ now, cost int64 }

// traceKind selects the traffic shape a trace is drawn from.
type traceKind int

const (
	steady traceKind = iota // evenly spread, from 0.67× to 2× the limit's rate
	bursty                  // tight clusters (often the same nanosecond) and quiet gaps
)

func (k traceKind) String() string { return [...]string{"steady", "bursty"}[k] }

// traceOptions shape a trace beyond its kind.
type traceOptions struct {
	mixedCosts bool // peeks, large costs and costs above the limit, not just 1
	stale      bool // occasional requests stamped before the newest one
}

// genTrace draws n requests for p from rng, starting at a random instant.
func genTrace(rng *rand.Rand, kind traceKind, n int, p Params, o traceOptions) []request {
	t := int64(1_700_000_000)*nsPerSecond + rng.Int64N(p.Window)
	perUnit := max(1, p.Window/p.Limit) // the gap at exactly the limit's rate
	out := make([]request, 0, n)
	for range n {
		switch kind {
		case steady:
			// mean gap perUnit·m/4 with m in [2, 6): 0.67× to 2× the limit's rate
			t += 1 + rng.Int64N(max(1, perUnit*(2+rng.Int64N(4))/2))
		case bursty:
			if rng.IntN(40) == 0 {
				t += rng.Int64N(2 * p.Window)
			} else if rng.IntN(3) > 0 {
				t += rng.Int64N(max(1, perUnit/8))
			}
		}
		cost := int64(1)
		if o.mixedCosts {
			switch r := rng.IntN(100); {
			case r < 5:
				cost = 0
			case r < 13:
				cost = 1 + rng.Int64N(p.Limit)
			case r < 15:
				cost = p.Limit + 1 + rng.Int64N(3)
			}
		}
		now := t
		if o.stale && rng.IntN(50) == 0 {
			now = t - rng.Int64N(p.Window/2+1)
		}
		out = append(out, request{now, cost})
	}
	return out
}

// testParams are the limits and windows the trace tests run under: tiny
// windows put many boundaries in a trace and stress the nanosecond
// arithmetic; long ones are the real use.
var testParams = []Params{
	{Limit: 1, Window: 1_000},
	{Limit: 3, Window: 7},
	{Limit: 10, Window: nsPerSecond},
	{Limit: 7, Window: 3_600 * nsPerSecond},
	{Limit: 100, Window: 60 * nsPerSecond},
}

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }
