package guard

import (
	"bytes"
	"errors"
)

// This file is the brute-force reference the incremental Validator is checked
// against: it judges a whole stream at once, written the way Redis'
// processMultibulkBuffer / processInlineBuffer / sdssplitargs read, with the
// guard's documented deviations (a '\n' inside a header line and a missing
// "\r\n" after a header or payload are refused at once). It shares no code
// with the validator.

// refVerdict is the reference's judgement of a stream.
type refVerdict struct {
	reqs     [][]string // requests completed before the end or the error
	err      error      // the violation, or nil
	complete bool       // no error and the stream ends between requests
}

var errRefIncomplete = errors.New("incomplete")

// refParse judges stream, reading requests until the end or a violation.
func refParse(stream []byte, l Limits, authed bool) refVerdict {
	maxArgs, maxBulk := l.MaxArgs, l.MaxBulkLen
	if !authed {
		maxArgs, maxBulk = l.UnauthMaxArgs, l.UnauthMaxBulkLen
	}
	var out refVerdict
	pos := 0
	for pos < len(stream) {
		var (
			args []string
			next int
			err  error
		)
		if stream[pos] == '*' {
			args, next, err = refMultibulk(stream, pos, l, maxArgs, maxBulk)
		} else {
			args, next, err = refInline(stream, pos, l, authed, maxArgs, maxBulk)
		}
		if err == errRefIncomplete {
			return out
		}
		if err != nil {
			out.err = err
			return out
		}
		if len(args) > 0 {
			out.reqs = append(out.reqs, args)
		}
		pos = next
	}
	out.complete = true
	return out
}

// refHeader reads the number of a header line starting at s[start] (the '*'
// or '$'): the content runs to the first '\r' or '\n'.
func refHeader(s []byte, start int, l Limits, tooBig, invalid error) (num int64, ok bool, next int, err error) {
	content := s[start+1:]
	end := bytes.IndexAny(content, "\r\n")
	length := end
	if end < 0 {
		length = len(content)
	}
	if 1+length > l.MaxInlineLen {
		return 0, false, 0, tooBig
	}
	if end < 0 {
		return 0, false, 0, errRefIncomplete
	}
	if content[end] == '\n' {
		return 0, false, 0, invalid
	}
	num, ok = refString2ll(content[:end])
	return num, ok, start + 1 + end + 1, nil // just past the '\r'
}

// refString2ll is a literal port of Redis' string2ll.
func refString2ll(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) >= 21 {
		return 0, false
	}
	if len(s) == 1 && s[0] == '0' {
		return 0, true
	}
	p := 0
	negative := false
	if s[0] == '-' {
		negative = true
		p++
		if p == len(s) {
			return 0, false
		}
	}
	var v uint64
	if s[p] >= '1' && s[p] <= '9' {
		v = uint64(s[p] - '0')
		p++
	} else {
		return 0, false
	}
	for p < len(s) && s[p] >= '0' && s[p] <= '9' {
		if v > ^uint64(0)/10 {
			return 0, false
		}
		v *= 10
		if v > ^uint64(0)-uint64(s[p]-'0') {
			return 0, false
		}
		v += uint64(s[p] - '0')
		p++
	}
	if p < len(s) {
		return 0, false
	}
	if negative {
		if v > uint64(1)<<63 {
			return 0, false
		}
		return int64(-v), true
	}
	if v > uint64(1)<<63-1 {
		return 0, false
	}
	return int64(v), true
}

func refMultibulk(s []byte, pos int, l Limits, maxArgs, maxBulk int64) ([]string, int, error) {
	count, ok, p, err := refHeader(s, pos, l, ErrTooBigMbulkCount, ErrInvalidMultibulkLength)
	if err != nil {
		return nil, 0, err
	}
	if !ok || count > l.MaxArgs {
		return nil, 0, ErrInvalidMultibulkLength
	}
	if count > maxArgs {
		return nil, 0, ErrUnauthMultibulkLength
	}
	if p == len(s) {
		return nil, 0, errRefIncomplete
	}
	if s[p] != '\n' {
		return nil, 0, ErrInvalidMultibulkLength
	}
	p++
	var args []string
	for a := int64(0); a < count; a++ {
		if p == len(s) {
			return nil, 0, errRefIncomplete
		}
		if s[p] != '$' {
			return nil, 0, expectedDollar(s[p])
		}
		size, ok, q, err := refHeader(s, p, l, ErrTooBigBulkCount, ErrInvalidBulkLength)
		if err != nil {
			return nil, 0, err
		}
		if !ok || size < 0 || size > l.MaxBulkLen {
			return nil, 0, ErrInvalidBulkLength
		}
		if size > maxBulk {
			return nil, 0, ErrUnauthBulkLength
		}
		p = q
		if p == len(s) {
			return nil, 0, errRefIncomplete
		}
		if s[p] != '\n' {
			return nil, 0, ErrInvalidBulkLength
		}
		p++
		if int64(len(s)-p) < size+1 {
			return nil, 0, errRefIncomplete
		}
		payload := s[p : p+int(size)]
		p += int(size)
		if s[p] != '\r' {
			return nil, 0, ErrInvalidBulkLength
		}
		if p+1 == len(s) {
			return nil, 0, errRefIncomplete
		}
		if s[p+1] != '\n' {
			return nil, 0, ErrInvalidBulkLength
		}
		p += 2
		args = append(args, string(payload))
	}
	return args, p, nil
}

func refInline(s []byte, pos int, l Limits, authed bool, maxArgs, maxBulk int64) ([]string, int, error) {
	nl := bytes.IndexByte(s[pos:], '\n')
	length := nl
	if nl < 0 {
		length = len(s) - pos
	}
	if length > l.MaxInlineLen {
		return nil, 0, ErrTooBigInline
	}
	if nl < 0 {
		return nil, 0, errRefIncomplete
	}
	line := s[pos : pos+nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	args, ok := refSplitArgs(line)
	if !ok {
		return nil, 0, ErrUnbalancedQuotes
	}
	if int64(len(args)) > l.MaxArgs {
		return nil, 0, ErrTooBigInline
	}
	// sluice's deviation: the pre-AUTH limits apply to inline words too.
	if !authed {
		if int64(len(args)) > maxArgs {
			return nil, 0, ErrUnauthMultibulkLength
		}
		for _, a := range args {
			if int64(len(a)) > maxBulk {
				return nil, 0, ErrUnauthBulkLength
			}
		}
	}
	return args, pos + nl + 1, nil
}

// refSplitArgs is a literal port of Redis' sdssplitargs. The C code reads
// the line as a NUL-terminated string; at() gives the NUL past the end, and
// an embedded NUL ends the string just as it does in C.
func refSplitArgs(line []byte) ([]string, bool) {
	at := func(i int) byte {
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	isspace := func(c byte) bool {
		return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
	}
	ishex := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
	}
	hexval := func(c byte) byte {
		switch {
		case c >= '0' && c <= '9':
			return c - '0'
		case c >= 'a' && c <= 'f':
			return c - 'a' + 10
		}
		return c - 'A' + 10
	}
	var vector []string
	p := 0
	for {
		for at(p) != 0 && isspace(at(p)) {
			p++
		}
		if at(p) == 0 {
			return vector, true
		}
		inq, insq, done := false, false, false
		var current []byte
		for !done {
			switch {
			case inq:
				switch {
				case at(p) == '\\' && at(p+1) == 'x' && ishex(at(p+2)) && ishex(at(p+3)):
					current = append(current, hexval(at(p+2))*16+hexval(at(p+3)))
					p += 3
				case at(p) == '\\' && at(p+1) != 0:
					p++
					c := at(p)
					switch c {
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
					current = append(current, c)
				case at(p) == '"':
					if at(p+1) != 0 && !isspace(at(p+1)) {
						return nil, false
					}
					done = true
				case at(p) == 0:
					return nil, false
				default:
					current = append(current, at(p))
				}
			case insq:
				switch {
				case at(p) == '\\' && at(p+1) == '\'':
					p++
					current = append(current, '\'')
				case at(p) == '\'':
					if at(p+1) != 0 && !isspace(at(p+1)) {
						return nil, false
					}
					done = true
				case at(p) == 0:
					return nil, false
				default:
					current = append(current, at(p))
				}
			default:
				switch at(p) {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					current = append(current, at(p))
				}
			}
			if at(p) != 0 {
				p++
			}
		}
		vector = append(vector, string(current))
	}
}
