package window

import (
	"fmt"
	"testing"
)

// reference is a brute-force model of one algorithm.
type reference interface {
	check(now int64, p Params, cost int64) refOutcome
}

// againstReference runs seeded random traces through the real state type
// (stored and expired as the keyspace would) and a fresh reference, and
// demands identical decisions and results at every step. Along the way it
// checks every finite RetryAfter by probing one nanosecond before it and at
// it, and round-trips the state through its encoding every few steps.
func againstReference[S checker[S]](t *testing.T, decode func([]byte) (S, error), newRef func() reference, params []Params) {
	t.Helper()
	var allowed, limited, probed, peeks, never int
	defer func() {
		t.Logf("decisions: %d allowed, %d limited (%d RetryAfter probed, %d never), %d peeks",
			allowed, limited, probed, never, peeks)
	}()
	seeds := uint64(12)
	steps := 2_000
	if testing.Short() {
		seeds, steps = 3, 500
	}
	for _, p := range params {
		for _, kind := range []traceKind{steady, bursty} {
			for seed := range seeds {
				name := fmt.Sprintf("limit=%d/window=%d/%s/seed=%d", p.Limit, p.Window, kind, seed)
				trace := genTrace(seeded(seed), kind, steps, p, traceOptions{mixedCosts: true, stale: true})
				var k key[S]
				ref := newRef()
				for i, r := range trace {
					if k.expiresBy(r.now) {
						ref = newRef() // the keyspace forgets the key, so must the model
					}
					want := ref.check(r.now, p, r.cost)
					got, err := k.check(r.now, p, r.cost)
					if err != nil {
						t.Fatalf("%s step %d (now=%d cost=%d): %v", name, i, r.now, r.cost, err)
					}
					if got != want {
						t.Fatalf("%s step %d (now=%d cost=%d):\n got %+v\nwant %+v", name, i, r.now, r.cost, got, want)
					}
					switch {
					case r.cost == 0:
						peeks++
					case !got.res.Limited:
						allowed++
					case got.res.RetryAfter == -1:
						limited++
						never++
					default:
						limited++
						probed++
					}
					if ra := got.res.RetryAfter; got.res.Limited && ra != -1 {
						if ra < 1 {
							t.Fatalf("%s step %d: limited with RetryAfter %d", name, i, ra)
						}
						before, _ := k.probe(r.now+ra-1, p, r.cost)
						at, _ := k.probe(r.now+ra, p, r.cost)
						if !before.res.Limited || at.res.Limited {
							t.Fatalf("%s step %d: RetryAfter %d: limited 1 ns before = %v, at = %v",
								name, i, ra, before.res.Limited, at.res.Limited)
						}
					}
					if k.exists && i%5 == 0 {
						b := k.s.AppendBinary(nil)
						s, err := decode(b)
						if err != nil {
							t.Fatalf("%s step %d: decode own encoding %x: %v", name, i, b, err)
						}
						if b2 := s.AppendBinary(nil); string(b2) != string(b) {
							t.Fatalf("%s step %d: re-encoding differs: %x vs %x", name, i, b2, b)
						}
						k.s = s
					}
				}
			}
		}
	}
}

func TestLogMatchesReference(t *testing.T) {
	againstReference(t, DecodeLog, func() reference { return &refLog{} }, testParams)
}

func TestCounterMatchesReference(t *testing.T) {
	againstReference(t, DecodeCounter, func() reference { return &refCounter{} }, testParams)
}

func TestFixedMatchesReference(t *testing.T) {
	againstReference(t, DecodeFixed, func() reference { return &refFixed{} }, testParams)
}
