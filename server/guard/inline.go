package guard

import "strconv"

// inlineState is where Redis' argument splitter (sdssplitargs) would stand.
type inlineState uint8

const (
	inBlank      inlineState = iota // between words
	inWord                          // in an unquoted word
	inDouble                        // inside "..."
	inDoubleEsc                     // after '\' inside "..."
	inDoubleHex                     // after "\x" inside "..."
	inDoubleHex1                    // after "\x" and one hex digit
	inSingle                        // inside '...'
	inSingleEsc                     // after '\' inside '...'
	inClosed                        // after a closing quote: a blank or the end must follow
	inIgnore                        // after a NUL outside quotes: the splitter stops there
	inBad                           // the splitter will refuse the line (see unbalanced)
)

// inlineKeepCap is the largest buffer an inline parser keeps between lines;
// a bigger one (from a long line) is dropped rather than pinned.
const inlineKeepCap = 4096

// inlineParser splits one inline line into words incrementally, reaching the
// verdict Redis reaches by cutting the line at '\n' (and a '\r' before it)
// and running sdssplitargs over it. That splitter reads the line as a C
// string, so a NUL ends it outside quotes and is an unterminated quote inside.
type inlineParser struct {
	limits *Limits
	state  inlineState
	// lineLen counts the line's bytes so far, '\r's included.
	lineLen int
	// pendingCR: the last byte was '\r', not yet known to be the line end.
	pendingCR bool
	hex1      byte
	// words holds the words back to back; ends[i] is where word i ends.
	words []byte
	ends  []int32
}

func (p *inlineParser) reset() {
	p.state = inBlank
	p.lineLen = 0
	p.pendingCR = false
	if cap(p.words) > inlineKeepCap {
		p.words = nil
	}
	if cap(p.ends) > inlineKeepCap/4 {
		p.ends = nil
	}
	p.words = p.words[:0]
	p.ends = p.ends[:0]
}

// next consumes line bytes from src, through the '\n' if src has it.
func (p *inlineParser) next(src []byte) (int, Event, error) {
	for i, c := range src {
		if c == '\n' {
			if err := p.finish(); err != nil {
				return i, EventSkip, err
			}
			if len(p.ends) == 0 {
				return i + 1, EventEmpty, nil
			}
			return i + 1, EventInline, nil
		}
		if p.lineLen++; p.lineLen > p.limits.MaxInlineLen {
			return i, EventSkip, ErrTooBigInline
		}
		if p.pendingCR {
			p.feed('\r')
		}
		p.pendingCR = c == '\r'
		if !p.pendingCR {
			p.feed(c)
		}
	}
	return len(src), EventSkip, nil
}

// finish ends the line: a '\r' just before the '\n' is not part of it.
func (p *inlineParser) finish() error {
	switch p.state {
	case inBlank, inIgnore:
	case inWord, inClosed:
		p.endWord()
	default: // an open quote, or inBad
		return ErrUnbalancedQuotes
	}
	// Counted only now, so that a line both too long in words and badly
	// quoted gets the quoting error, as the splitter runs first in Redis.
	if int64(len(p.ends)) > p.limits.MaxArgs {
		return ErrTooBigInline
	}
	return nil
}

// unbalanced records that the splitter will refuse the line. The verdict
// waits for the line's end so that, as in Redis, a line that also runs too
// long reports "too big inline request" instead.
func (p *inlineParser) unbalanced() { p.state = inBad }

func (p *inlineParser) endWord() { p.ends = append(p.ends, int32(len(p.words))) }

// isSpace is C's isspace in the "C" locale, which sdssplitargs uses to skip
// blanks and to check what follows a closing quote.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexValue(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// feed advances the splitter by one byte of the line (never '\n').
func (p *inlineParser) feed(c byte) {
	switch p.state {
	case inBlank:
		switch {
		case isSpace(c):
		case c == 0:
			p.state = inIgnore
		default:
			p.state = inWord
			p.word(c)
		}
	case inWord:
		p.word(c)
	case inDouble:
		switch c {
		case '\\':
			p.state = inDoubleEsc
		case '"':
			p.state = inClosed
		case 0:
			p.unbalanced()
		default:
			p.words = append(p.words, c)
		}
	case inDoubleEsc:
		switch c {
		case 'x':
			p.state = inDoubleHex
			return
		case 0:
			// "\" then the end of the C string: unterminated.
			p.unbalanced()
			return
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'b':
			c = '\b'
		case 'a':
			c = '\a'
		}
		p.words = append(p.words, c)
		p.state = inDouble
	case inDoubleHex:
		if isHex(c) {
			p.hex1 = c
			p.state = inDoubleHex1
			return
		}
		// Not "\xHH": the splitter took "\x" as an escaped 'x'.
		p.words = append(p.words, 'x')
		p.state = inDouble
		p.feed(c)
	case inDoubleHex1:
		if isHex(c) {
			p.words = append(p.words, hexValue(p.hex1)<<4|hexValue(c))
			p.state = inDouble
			return
		}
		p.words = append(p.words, 'x', p.hex1)
		p.state = inDouble
		p.feed(c)
	case inSingle:
		switch c {
		case '\\':
			p.state = inSingleEsc
		case '\'':
			p.state = inClosed
		case 0:
			p.unbalanced()
		default:
			p.words = append(p.words, c)
		}
	case inSingleEsc:
		if c == '\'' {
			p.words = append(p.words, '\'')
			p.state = inSingle
			return
		}
		// Only \' is an escape inside '...'; the '\' stays.
		p.words = append(p.words, '\\')
		p.state = inSingle
		p.feed(c)
	case inClosed:
		switch {
		case isSpace(c):
			p.endWord()
			p.state = inBlank
		case c == 0:
			p.endWord()
			p.state = inIgnore
		default:
			p.unbalanced()
		}
	case inIgnore, inBad:
	}
}

// word advances an unquoted word. Only these four bytes (and NUL) end one;
// '\v' and '\f' are skipped between words but kept inside them, as in Redis.
func (p *inlineParser) word(c byte) {
	switch c {
	case ' ', '\r', '\t':
		p.endWord()
		p.state = inBlank
	case 0:
		p.endWord()
		p.state = inIgnore
	case '"':
		p.state = inDouble
	case '\'':
		p.state = inSingle
	default:
		p.words = append(p.words, c)
	}
}

// appendRequest appends the words of the finished line as a multibulk request.
func (p *inlineParser) appendRequest(dst []byte) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(p.ends)), 10)
	dst = append(dst, '\r', '\n')
	start := int32(0)
	for _, end := range p.ends {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(end-start), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, p.words[start:end]...)
		dst = append(dst, '\r', '\n')
		start = end
	}
	return dst
}
