package commands

import "strconv"

// MaxPatternLen is the longest glob pattern KEYS, SCAN MATCH, CONFIG GET
// and COMMAND LIST FILTERBY PATTERN accept. Matching costs time in the
// pattern's length for every key examined, and a compiled pattern holds a
// few bytes per pattern byte; the bound keeps both small whatever a client
// sends (Redis has none, and a 10 MB pattern there is a slow KEYS).
const MaxPatternLen = 64 << 10

// errPatternTooLong is the reply to a pattern over MaxPatternLen.
var errPatternTooLong = "ERR pattern is longer than " + strconv.Itoa(MaxPatternLen) + " bytes"

// glob is a compiled Redis glob pattern (KEYS, SCAN MATCH, COMMAND LIST
// FILTERBY PATTERN, CONFIG GET): '*' any run, '?' any byte, '[…]' a class
// with '^' negation, 'a-z' ranges and '\' escapes, '\x' a literal x.
// It follows Redis' stringmatchlen byte for byte, including its handling of
// an unterminated class, but matches in O(len(pattern) + len(string)²)
// steps: every token other than '*' consumes exactly one byte, so
// backtracking to the most recent '*' alone is enough, and no pattern can
// make it slow.
//
// Memory is bounded too: a token is 4 bytes and a class a 32-byte bit set,
// so compiling allocates at most about 12 bytes per pattern byte (the worst
// case is a run of one-byte classes, "[a][a]…"), and patterns are at most
// MaxPatternLen long.
//
// Two Redis quirks are kept: no pattern matches the empty string (KEYS and
// SCAN skip matching for the pattern "*" alone, see matchAll), and the
// empty pattern matches only the empty string.
type glob struct {
	toks []globTok
	sets []byteSet
	star bool // the pattern is exactly "*"
}

// globTok is one token: '*', '?', '[' (the class sets[arg]) or 'l' (the
// literal byte arg).
type globTok struct {
	kind byte
	_    byte
	arg  uint16
}

// byteSet is a set of bytes, one bit each.
type byteSet [4]uint64

func (b *byteSet) add(c byte)      { b[c>>6] |= 1 << (c & 63) }
func (b *byteSet) has(c byte) bool { return b[c>>6]&(1<<(c&63)) != 0 }
func (b *byteSet) addRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		b.add(byte(c))
	}
}

// compileGlob parses pattern as Redis reads it. It refuses a pattern longer
// than MaxPatternLen with errPatternTooLong, the reply to send.
func compileGlob(pattern []byte) (glob, string) {
	if len(pattern) > MaxPatternLen {
		return glob{}, errPatternTooLong
	}
	// Count first, so the tokens and the classes are one allocation each.
	toks, sets := 0, 0
	parseGlob(pattern, func(kind, _ byte, _ byteSet) {
		toks++
		if kind == '[' {
			sets++
		}
	})
	g := glob{star: string(pattern) == "*", toks: make([]globTok, 0, toks), sets: make([]byteSet, 0, sets)}
	parseGlob(pattern, func(kind, lit byte, set byteSet) {
		t := globTok{kind: kind, arg: uint16(lit)}
		if kind == '[' {
			t.arg = uint16(len(g.sets))
			g.sets = append(g.sets, set)
		}
		g.toks = append(g.toks, t)
	})
	return g, ""
}

// parseGlob calls emit for each token of pattern: '*' (runs of stars are
// one), '?', '[' with its set, or 'l' with its literal byte.
func parseGlob(pattern []byte, emit func(kind, lit byte, set byteSet)) {
	p := pattern
	prevStar := false
	for len(p) > 0 {
		star := p[0] == '*'
		switch p[0] {
		case '*':
			if !prevStar {
				emit('*', 0, byteSet{})
			}
			p = p[1:]
		case '?':
			emit('?', 0, byteSet{})
			p = p[1:]
		case '[':
			var set byteSet
			p = p[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			for {
				if len(p) >= 2 && p[0] == '\\' {
					set.add(p[1])
					p = p[2:]
				} else if len(p) == 0 {
					// Unterminated: the class is what was there.
					break
				} else if p[0] == ']' {
					p = p[1:]
					break
				} else if len(p) >= 3 && p[1] == '-' {
					lo, hi := p[0], p[2]
					if lo > hi {
						lo, hi = hi, lo
					}
					set.addRange(lo, hi)
					p = p[3:]
				} else {
					set.add(p[0])
					p = p[1:]
				}
			}
			if not {
				for i := range set {
					set[i] = ^set[i]
				}
			}
			emit('[', 0, set)
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			emit('l', p[0], byteSet{})
			p = p[1:]
		default:
			emit('l', p[0], byteSet{})
			p = p[1:]
		}
		prevStar = star
	}
}

// matchAll reports whether the pattern is "*", for which Redis returns
// every key without matching (so the empty key too).
func (g glob) matchAll() bool { return g.star }

// literal returns the one string the pattern matches, if it has no
// wildcard.
func (g glob) literal() ([]byte, bool) {
	for _, t := range g.toks {
		if t.kind != 'l' {
			return nil, false
		}
	}
	b := make([]byte, len(g.toks))
	for i, t := range g.toks {
		b[i] = byte(t.arg)
	}
	return b, true
}

func (g *glob) one(t globTok, c byte) bool {
	switch t.kind {
	case '?':
		return true
	case '[':
		return g.sets[t.arg].has(c)
	}
	return byte(t.arg) == c
}

// match reports whether s matches the whole pattern.
func (g glob) match(s []byte) bool {
	ok, _ := g.matchSteps(s)
	return ok
}

// matchSteps is match, also counting the steps taken (for the test that
// bounds them).
func (g glob) matchSteps(s []byte) (matched bool, steps int) {
	if len(s) == 0 {
		return len(g.toks) == 0, 0
	}
	ti, si := 0, 0
	starT, starS := -1, 0
	for si < len(s) {
		steps++
		switch {
		case ti < len(g.toks) && g.toks[ti].kind == '*':
			starT, starS = ti, si
			ti++
		case ti < len(g.toks) && g.one(g.toks[ti], s[si]):
			ti++
			si++
		case starT >= 0:
			// Let the last '*' take one more byte and retry after it.
			starS++
			ti, si = starT+1, starS
		default:
			return false, steps
		}
	}
	for ti < len(g.toks) && g.toks[ti].kind == '*' {
		steps++
		ti++
	}
	return ti == len(g.toks), steps
}
