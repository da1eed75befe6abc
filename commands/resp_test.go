package commands

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// respValue is a parsed reply, for tests: kind is the RESP type byte.
type respValue struct {
	kind  byte
	str   string      // simple, error, bulk, verbatim (without "txt:"), double, big number
	num   int64       // integer, bool (1/0)
	null  bool        // $-1, *-1, _
	elems []respValue // array, set, push, map (k1, v1, k2, v2 …), attribute
}

var errIncomplete = errors.New("incomplete reply")

// parseRESP reads exactly one reply from b and returns it with the bytes it
// used. It accepts RESP2 and RESP3, and checks every length and line end.
func parseRESP(b []byte) (respValue, int, error) {
	return parseRESPDepth(b, 0)
}

func parseRESPDepth(b []byte, depth int) (respValue, int, error) {
	if depth > 64 {
		return respValue{}, 0, errors.New("reply nested too deep")
	}
	if len(b) == 0 {
		return respValue{}, 0, errIncomplete
	}
	end := bytes.Index(b, []byte("\r\n"))
	if end < 0 {
		return respValue{}, 0, errIncomplete
	}
	line := string(b[1:end])
	if bytes.IndexByte(b[:end], '\n') >= 0 || bytes.IndexByte(b[:end], '\r') >= 0 {
		return respValue{}, 0, fmt.Errorf("bare CR or LF in %q", line)
	}
	v := respValue{kind: b[0]}
	n := end + 2
	count := func() (int64, error) {
		c, err := strconv.ParseInt(line, 10, 64)
		if err != nil || c < -1 {
			return 0, fmt.Errorf("bad length %q", line)
		}
		return c, nil
	}
	switch b[0] {
	case '+', '-':
		v.str = line
	case ':':
		x, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			return v, 0, fmt.Errorf("bad integer %q", line)
		}
		v.num = x
	case ',':
		if _, err := strconv.ParseFloat(line, 64); err != nil && line != "inf" && line != "-inf" && line != "nan" {
			return v, 0, fmt.Errorf("bad double %q", line)
		}
		v.str = line
	case '(':
		v.str = line
	case '#':
		if line != "t" && line != "f" {
			return v, 0, fmt.Errorf("bad boolean %q", line)
		}
		if line == "t" {
			v.num = 1
		}
	case '_':
		if line != "" {
			return v, 0, fmt.Errorf("bad null %q", line)
		}
		v.null = true
	case '$', '=', '!':
		c, err := count()
		if err != nil {
			return v, 0, err
		}
		if c == -1 {
			if b[0] != '$' {
				return v, 0, fmt.Errorf("null %c", b[0])
			}
			v.null = true
			break
		}
		if int64(len(b)-n) < c+2 {
			return v, 0, errIncomplete
		}
		body := b[n : n+int(c)]
		if string(b[n+int(c):n+int(c)+2]) != "\r\n" {
			return v, 0, fmt.Errorf("bulk of %d not followed by CRLF", c)
		}
		n += int(c) + 2
		v.str = string(body)
		if b[0] == '=' {
			if len(body) < 4 || body[3] != ':' {
				return v, 0, fmt.Errorf("verbatim without format: %q", body)
			}
			v.str = string(body[4:])
		}
	case '*', '~', '>', '%', '|':
		c, err := count()
		if err != nil {
			return v, 0, err
		}
		if c == -1 {
			if b[0] != '*' {
				return v, 0, fmt.Errorf("null %c", b[0])
			}
			v.null = true
			break
		}
		if b[0] == '%' || b[0] == '|' {
			c *= 2
		}
		for range c {
			e, m, err := parseRESPDepth(b[n:], depth+1)
			if err != nil {
				return v, 0, err
			}
			v.elems = append(v.elems, e)
			n += m
		}
		if b[0] == '|' {
			// An attribute precedes the reply it describes.
			e, m, err := parseRESPDepth(b[n:], depth+1)
			if err != nil {
				return v, 0, err
			}
			return e, n + m, nil
		}
	default:
		return v, 0, fmt.Errorf("unknown type byte %q", b[0])
	}
	return v, n, nil
}

// resp3Only are the types a RESP2 connection must never receive.
func resp3Only(v respValue) bool {
	switch v.kind {
	case '%', '~', ',', '_', '=', '#', '(', '>', '|', '!':
		return true
	}
	for _, e := range v.elems {
		if resp3Only(e) {
			return true
		}
	}
	return false
}

// asMap turns a map reply (RESP3 %, or a RESP2 flat array) into a Go map of
// bulk/simple keys.
func (v respValue) asMap() map[string]respValue {
	m := map[string]respValue{}
	for i := 0; i+1 < len(v.elems); i += 2 {
		m[v.elems[i].str] = v.elems[i+1]
	}
	return m
}
