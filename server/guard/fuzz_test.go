package guard

import (
	"math/rand/v2"
	"testing"
)

// FuzzValidator checks that the validator reaches one verdict however the
// stream is split, that the verdict is the reference's, and that what it
// hands on is what redcon then parses.
func FuzzValidator(f *testing.F) {
	for _, c := range streamCases {
		if len(c.stream) < 200 {
			f.Add([]byte(c.stream), uint64(len(c.name)))
		}
	}
	f.Fuzz(func(t *testing.T, stream []byte, seed uint64) {
		l := DefaultLimits()
		if seed&1 == 1 {
			l = smallLimits()
		}
		authed := seed&2 == 0
		whole := transcode(t, l, authed, stream)
		ones := make([][]byte, len(stream))
		for i := range stream {
			ones[i] = stream[i : i+1]
		}
		if got := transcode(t, l, authed, ones...); !got.equal(whole) {
			t.Fatalf("byte by byte: %q %v; whole: %q %v", got.out, got.err, whole.out, whole.err)
		}
		rng := rand.New(rand.NewPCG(seed, 0))
		if got := transcode(t, l, authed, randomChunks(rng, stream)...); !got.equal(whole) {
			t.Fatalf("random chunks: %q %v; whole: %q %v", got.out, got.err, whole.out, whole.err)
		}
		ref := refParse(stream, l, authed)
		reqs := decodeWithRedcon(t, whole.out)
		if !equalReqs(reqs, ref.reqs) || errText(whole.err) != errText(ref.err) ||
			(whole.err == nil && whole.atBoundary) != ref.complete {
			t.Fatalf("validator %q %v boundary=%v; reference %q %v complete=%v",
				reqs, whole.err, whole.atBoundary, ref.reqs, ref.err, ref.complete)
		}
	})
}

// FuzzFramedServer sends arbitrary bytes to a Framer-driven server over
// loopback. The test process dying is the failure it looks for; after each
// input a fresh client must still get PONG.
func FuzzFramedServer(f *testing.F) {
	open, _ := startServer(f, DefaultLimits(), false)
	locked, _ := startServer(f, DefaultLimits(), true)
	for _, c := range streamCases {
		if len(c.stream) < 200 {
			f.Add([]byte(c.stream), c.unauth)
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte, authRequired bool) {
		addr := open
		if authRequired {
			addr = locked
		}
		exchange(t, addr, payload)
		ping(t, addr)
	})
}
