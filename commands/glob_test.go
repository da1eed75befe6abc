package commands

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// redisMatch is Redis 7.2's stringmatchlen transcribed directly
// (recursive on '*', with its skipLongerMatches cut): the reference glob
// is checked against.
func redisMatch(p, s []byte) bool {
	skip := false
	return redisMatchImpl(p, s, &skip)
}

func redisMatchImpl(p, s []byte, skip *bool) bool {
	at := func(b []byte, i int) byte { // C reads the NUL terminator past the end
		if i < len(b) {
			return b[i]
		}
		return 0
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 0 && at(p, 1) == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for len(s) > 0 {
				if redisMatchImpl(p[1:], s, skip) {
					return true
				}
				if *skip {
					return false
				}
				s = s[1:]
			}
			*skip = true
			return false
		case '?':
			s = s[1:]
		case '[':
			p = p[1:]
			not := at(p, 0) == '^'
			if not {
				p = p[1:]
			}
			match := false
			for {
				if at(p, 0) == '\\' && len(p) >= 2 {
					p = p[1:]
					if p[0] == s[0] {
						match = true
					}
				} else if len(p) > 0 && p[0] == ']' {
					break
				} else if len(p) == 0 {
					// Redis steps back so the loop's p++ lands on the end.
					p = []byte{0}
					break
				} else if len(p) >= 3 && p[1] == '-' {
					lo, hi := p[0], p[2]
					if lo > hi {
						lo, hi = hi, lo
					}
					p = p[2:]
					if s[0] >= lo && s[0] <= hi {
						match = true
					}
				} else if p[0] == s[0] {
					match = true
				}
				p = p[1:]
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}

func TestGlobExamples(t *testing.T) {
	for _, tc := range []struct {
		pat, s string
		want   bool
	}{
		{"h?llo", "hello", true},
		{"h*llo", "heeeello", true},
		{"h[ae]llo", "hallo", true},
		{"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true},
		{"h[^e]llo", "hello", false},
		{"h[a-b]llo", "hbllo", true},
		{"h[b-a]llo", "hallo", true},
		{`h\*llo`, "h*llo", true},
		{`h\*llo`, "hello", false},
		{"user:*", "user:1", true},
		{"user:*", "user:", true}, // trailing stars match nothing
		{"*", "", false},
		{"", "", true},
		{"", "a", false},
		{"a*", "a", true},
		{"a[", "a", false},
		{"a[b", "ab", true},
		{`a\`, `a\`, true},
		{"*a*b", "xxaxxb", true},
		{"*a*b", "xxaxxbc", false},
	} {
		if got := mustGlob(t, []byte(tc.pat)).match([]byte(tc.s)); got != tc.want {
			t.Errorf("%q ~ %q = %v, want %v", tc.pat, tc.s, got, tc.want)
		}
		if got := redisMatch([]byte(tc.pat), []byte(tc.s)); got != tc.want {
			t.Errorf("reference: %q ~ %q = %v, want %v", tc.pat, tc.s, got, tc.want)
		}
	}
}

// Random patterns over a small alphabet, against the transcription of
// Redis' matcher.
func TestGlobAgainstRedis(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	patAlpha := []byte(`ab*?[]^-\`)
	strAlpha := []byte(`ab-]^\*`)
	gen := func(alpha []byte, n int) []byte {
		b := make([]byte, rng.IntN(n+1))
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return b
	}
	for i := range 200000 {
		p, s := gen(patAlpha, 8), gen(strAlpha, 8)
		if i%3 == 0 {
			s = append(s, p...) // pattern bytes in the subject make matches likelier
		}
		want := redisMatch(p, s)
		if got := mustGlob(t, p).match(s); got != want {
			t.Fatalf("%q ~ %q = %v, Redis says %v", p, s, got, want)
		}
	}
}

// A pattern that makes naive backtracking exponential stays linear-ish.
func BenchmarkGlobPathological(b *testing.B) {
	g := mustGlob(b, []byte("a*a*a*a*a*a*a*a*a*a*a*a*b"))
	s := make([]byte, 200)
	for i := range s {
		s[i] = 'a'
	}
	for b.Loop() {
		g.match(s)
	}
}

func mustGlob(t testing.TB, p []byte) glob {
	t.Helper()
	g, bad := compileGlob(p)
	if bad != "" {
		t.Fatalf("compileGlob(%.40q…): %s", p, bad)
	}
	return g
}

// repeat is n copies of unit.
func repeat(unit string, n int) []byte { return bytes.Repeat([]byte(unit), n) }

// allocated is the heap bytes f allocates, averaged over runs.
func allocated(f func()) uint64 {
	const runs = 5
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / runs
}

// Compiling any pattern allocates a bounded number of bytes per pattern
// byte, whatever its tokens: a run of one-byte classes used to cost a
// 256-byte table each (a 10 MB "[a]…" pattern took a gigabyte).
func TestGlobCompileMemoryIsBounded(t *testing.T) {
	for _, unit := range []string{"[a]", "a", "*a", "?", "[^a-z]", `\[`, "[", "[a-b"} {
		p := repeat(unit, MaxPatternLen/len(unit))
		var g glob
		perByte := float64(allocated(func() { g, _ = compileGlob(p) })) / float64(len(p))
		if perByte > 16 {
			t.Errorf("%q × %d: compiling allocates %.1f bytes per pattern byte, want ≤ 16", unit, len(p)/len(unit), perByte)
		}
		// The compiled pattern still works.
		s := repeat(unit, 3)
		if ok := g.match(s); ok != redisMatch(p, s) {
			t.Errorf("%q × %d ~ %q = %v, Redis says %v", unit, len(p)/len(unit), s, ok, !ok)
		}
	}
}

// A pattern over MaxPatternLen is refused without compiling it: nothing is
// allocated for it, however long it is.
func TestGlobRefusesLongPatternsWithoutAllocating(t *testing.T) {
	p := repeat("[a]", 10<<20/3)
	var bad string
	if n := testing.AllocsPerRun(3, func() { _, bad = compileGlob(p) }); n != 0 {
		t.Errorf("refusing a %d-byte pattern allocated %v times", len(p), n)
	}
	if bad != errPatternTooLong || !strings.Contains(bad, strconv.Itoa(MaxPatternLen)) {
		t.Errorf("reply %q", bad)
	}
	if _, bad := compileGlob(repeat("a", MaxPatternLen)); bad != "" {
		t.Errorf("a pattern of exactly MaxPatternLen bytes is refused: %s", bad)
	}
}

// Matching takes at most len(tokens) + (len(s)+1)² steps, and allocates
// nothing, for the patterns that make naive matchers exponential.
func TestGlobMatchStepsAreBounded(t *testing.T) {
	subject := repeat("a", 300)
	for _, p := range [][]byte{
		repeat("*a", 500),
		append(repeat("a*", 40), 'b'),
		append(append([]byte("*"), repeat("[a]", 250)...), 'b'),
		append(repeat("?*", 200), repeat("a", 400)...),
	} {
		g := mustGlob(t, p)
		ok, steps := g.matchSteps(subject)
		if limit := len(g.toks) + (len(subject)+1)*(len(subject)+1); steps > limit {
			t.Errorf("%.30q…: %d steps, want ≤ %d", p, steps, limit)
		}
		if want := redisMatch(p, subject); ok != want {
			t.Errorf("%.30q… = %v, Redis says %v", p, ok, want)
		}
		if n := testing.AllocsPerRun(3, func() { g.match(subject) }); n != 0 {
			t.Errorf("%.30q…: match allocates %v times", p, n)
		}
	}
}
