package guard

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// randomStream builds a stream of requests from the pieces that matter to
// the grammar, then mutates it, so that most streams are nearly valid.
func randomStream(rng *rand.Rand) []byte {
	var s []byte
	atoms := []string{"", "a", "PING", "CL.THROTTLE", "a b", "\r\n", "\"", "'", "\\", "\\x4", "\\x41", "\x00", "\v", "$", "*", "-1", "0"}
	for range rng.IntN(5) + 1 {
		switch rng.IntN(4) {
		case 0, 1:
			n := rng.IntN(5)
			s = append(s, '*')
			s = strconv.AppendInt(s, int64(n), 10)
			s = append(s, "\r\n"...)
			for range n {
				a := atoms[rng.IntN(len(atoms))]
				if rng.IntN(4) == 0 {
					a = string(make([]byte, rng.IntN(40)))
				}
				s = append(s, '$')
				s = strconv.AppendInt(s, int64(len(a)), 10)
				s = append(s, "\r\n"...)
				s = append(s, a...)
				s = append(s, "\r\n"...)
			}
		case 2:
			for range rng.IntN(6) {
				s = append(s, atoms[rng.IntN(len(atoms))]...)
				s = append(s, " \t\"'"[rng.IntN(4)])
			}
			s = append(s, []string{"\n", "\r\n", "\r\r\n"}[rng.IntN(3)]...)
		case 3:
			s = append(s, []string{"*0\r\n", "*-1\r\n", "\r\n", "*11\r\n", "*1\r\n$16385\r\n", "*9\r\n", "*1\r\n$101\r\n"}[rng.IntN(7)]...)
		}
	}
	for range rng.IntN(4) {
		if len(s) == 0 {
			break
		}
		i := rng.IntN(len(s))
		switch rng.IntN(4) {
		case 0:
			s[i] = byte(rng.IntN(256))
		case 1:
			s[i] = "\r\n*$0123456789- \"'\\"[rng.IntN(19)]
		case 2:
			s = s[:i]
		case 3:
			s = append(s[:i], append([]byte{"\r\n$*"[rng.IntN(4)]}, s[i:]...)...)
		}
	}
	return s
}

// randomChunks cuts s at random places.
func randomChunks(rng *rand.Rand, s []byte) [][]byte {
	var chunks [][]byte
	for len(s) > 0 {
		n := 1 + rng.IntN(min(len(s), 1+rng.IntN(16)))
		chunks = append(chunks, s[:n])
		s = s[n:]
	}
	return chunks
}

// TestValidatorAgainstReference compares the incremental validator, fed in
// random chunks, with the whole-stream reference on seeded random streams.
func TestValidatorAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	limits := []Limits{DefaultLimits(), smallLimits()}
	for i := range 20000 {
		s := randomStream(rng)
		l := limits[i%2]
		authed := rng.IntN(3) != 0
		got := transcode(t, l, authed, randomChunks(rng, s)...)
		ref := refParse(s, l, authed)
		reqs := decodeWithRedcon(t, got.out)
		if !equalReqs(reqs, ref.reqs) || errText(got.err) != errText(ref.err) ||
			(got.err == nil && got.atBoundary) != ref.complete {
			t.Fatalf("stream %q (limits %d, authed %v):\nvalidator %q %v boundary=%v\nreference %q %v complete=%v",
				s, i%2, authed, reqs, got.err, got.atBoundary, ref.reqs, ref.err, ref.complete)
		}
	}
}
