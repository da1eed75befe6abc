package commands

// glob is a compiled Redis glob pattern (KEYS, SCAN MATCH, COMMAND LIST
// FILTERBY PATTERN, CONFIG GET): '*' any run, '?' any byte, '[…]' a class
// with '^' negation, 'a-z' ranges and '\' escapes, '\x' a literal x.
// It follows Redis' stringmatchlen byte for byte, including its handling of
// an unterminated class, but matches in O(len(pattern)·len(string)) time:
// every token other than '*' consumes exactly one byte, so backtracking to
// the most recent '*' alone is enough, and no pattern can make it slow.
//
// Two Redis quirks are kept: no pattern matches the empty string (KEYS and
// SCAN skip matching for the pattern "*" alone, see matchAll), and the
// empty pattern matches only the empty string.
type glob struct {
	toks []globTok
	star bool // the pattern is exactly "*"
}

type globTok struct {
	kind byte // '*', '?', '[' (class) or 'l' (literal)
	lit  byte
	set  *[256]bool
}

// compileGlob parses pattern as Redis reads it.
func compileGlob(pattern []byte) glob {
	g := glob{star: string(pattern) == "*"}
	p := pattern
	for len(p) > 0 {
		switch p[0] {
		case '*':
			if n := len(g.toks); n == 0 || g.toks[n-1].kind != '*' {
				g.toks = append(g.toks, globTok{kind: '*'})
			}
			p = p[1:]
		case '?':
			g.toks = append(g.toks, globTok{kind: '?'})
			p = p[1:]
		case '[':
			var set [256]bool
			p = p[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			for {
				if len(p) >= 2 && p[0] == '\\' {
					set[p[1]] = true
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
					for c := int(lo); c <= int(hi); c++ {
						set[c] = true
					}
					p = p[3:]
				} else {
					set[p[0]] = true
					p = p[1:]
				}
			}
			if not {
				for i := range set {
					set[i] = !set[i]
				}
			}
			g.toks = append(g.toks, globTok{kind: '[', set: &set})
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			g.toks = append(g.toks, globTok{kind: 'l', lit: p[0]})
			p = p[1:]
		default:
			g.toks = append(g.toks, globTok{kind: 'l', lit: p[0]})
			p = p[1:]
		}
	}
	return g
}

// matchAll reports whether the pattern is "*", for which Redis returns
// every key without matching (so the empty key too).
func (g glob) matchAll() bool { return g.star }

// literal returns the one string the pattern matches, if it has no
// wildcard.
func (g glob) literal() ([]byte, bool) {
	b := make([]byte, 0, len(g.toks))
	for _, t := range g.toks {
		if t.kind != 'l' {
			return nil, false
		}
		b = append(b, t.lit)
	}
	return b, true
}

func (t globTok) one(c byte) bool {
	switch t.kind {
	case '?':
		return true
	case '[':
		return t.set[c]
	}
	return t.lit == c
}

// match reports whether s matches the whole pattern.
func (g glob) match(s []byte) bool {
	if len(s) == 0 {
		return len(g.toks) == 0
	}
	ti, si := 0, 0
	starT, starS := -1, 0
	for si < len(s) {
		switch {
		case ti < len(g.toks) && g.toks[ti].kind == '*':
			starT, starS = ti, si
			ti++
		case ti < len(g.toks) && g.toks[ti].one(s[si]):
			ti++
			si++
		case starT >= 0:
			// Let the last '*' take one more byte and retry after it.
			starS++
			ti, si = starT+1, starS
		default:
			return false
		}
	}
	for ti < len(g.toks) && g.toks[ti].kind == '*' {
		ti++
	}
	return ti == len(g.toks)
}
