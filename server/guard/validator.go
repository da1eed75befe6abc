package guard

import "strconv"

// Event classifies the bytes one call to Validator.Next consumed, telling the
// caller what to hand on in their place.
type Event uint8

const (
	// EventSkip: the bytes are held by the validator (a "*<n>" header or an
	// inline line still being read) or ignored; hand on nothing yet.
	EventSkip Event = iota
	// EventBody: the bytes belong to a multibulk request and pass through
	// unchanged; the request is not finished. They may begin with the
	// request's "*<n>\r\n" header, when it was read in one piece.
	EventBody
	// EventBodyEnd: as EventBody, and the bytes finish the request.
	EventBodyEnd
	// EventHeader: the bytes finish a "*<n>" header (n > 0) that was read
	// in pieces; hand on Header() instead of them.
	EventHeader
	// EventEmpty: the bytes finish a request with no arguments ("*0",
	// "*-1", a blank inline line), which Redis skips; hand on nothing.
	EventEmpty
	// EventInline: the bytes finish an inline request; hand on
	// AppendInline() instead of them.
	EventInline
)

// state is where in the request grammar the validator stands.
type state uint8

const (
	stIdle      state = iota // between requests
	stCount                  // after '*': the argument count, up to '\r'
	stCountLF                // after the count's '\r'
	stDollar                 // before the '$' of an argument
	stBulkLen                // after '$': the bulk length, up to '\r'
	stBulkLenLF              // after the bulk length's '\r'
	stBulkData               // inside a bulk payload
	stBulkCR                 // after a payload, before its '\r'
	stBulkLF                 // after a payload's '\r'
	stInline                 // inside an inline line
)

// headerCap holds the longest header Header returns: '*', ten digits, "\r\n".
const headerCap = 16

// Validator checks a stream of RESP requests incrementally: feed it the bytes
// in order, in chunks of any size, and it reaches the same verdict however the
// stream is split. It keeps no copy of the stream except the number of a
// header line split across chunks (at most 20 bytes) and one inline line.
// Once it reports an error it is stuck on that error.
//
// A Validator is not safe for concurrent use.
type Validator struct {
	limits Limits
	// maxArgs and maxBulk are the limits in force: the Unauth ones until
	// the connection authenticates.
	maxArgs int64
	maxBulk int64

	state    state
	err      error
	count    int64 // the current request's argument count
	argsLeft int64 // arguments of the current request not yet finished
	dataLeft int64 // payload bytes of the current argument not yet read
	// numLen counts the bytes of a header number read so far; the first
	// maxNumLen of them are kept in num, which is all parseNumber needs.
	numLen int
	num    [maxNumLen]byte
	hdr    [headerCap]byte
	inline inlineParser
	// authed says the full limits are in force (SetAuthenticated).
	authed bool
	// pos is the stream offset of the next byte Next consumes.
	pos int64
	// spans locate the arguments of the multibulk request in progress in
	// the stream, so a Framer can hand them over without parsing again.
	spans []span
}

// span is where one bulk argument's payload lies in the stream.
type span struct {
	at int64 // stream offset of the first payload byte
	n  int64 // payload length
}

// spansKeepCap is the most spans kept between requests; the spans of a
// request with more arguments are dropped rather than pinned.
const spansKeepCap = 1024

// NewValidator returns a Validator between requests. It errors when limits
// do not Validate.
func NewValidator(limits Limits, authenticated bool) (*Validator, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	v := &Validator{}
	v.init(limits, authenticated)
	return v, nil
}

func (v *Validator) init(limits Limits, authenticated bool) {
	v.limits = limits
	v.inline.limits = &v.limits
	v.SetAuthenticated(authenticated)
}

// SetAuthenticated switches between the Unauth limits and the full ones. It
// applies to headers read after the call.
func (v *Validator) SetAuthenticated(ok bool) {
	v.authed = ok
	if ok {
		v.maxArgs, v.maxBulk = v.limits.MaxArgs, v.limits.MaxBulkLen
	} else {
		v.maxArgs, v.maxBulk = v.limits.UnauthMaxArgs, v.limits.UnauthMaxBulkLen
	}
}

// Reset forgets any request in progress and any error, putting the
// validator back between requests.
func (v *Validator) Reset() {
	v.state = stIdle
	v.err = nil
	v.inline.reset()
}

// AtBoundary reports whether the validator stands between requests.
func (v *Validator) AtBoundary() bool { return v.state == stIdle && v.err == nil }

// Err is the violation the validator is stuck on, or nil.
func (v *Validator) Err() error { return v.err }

// Header is the "*<n>\r\n" line of the request whose header the last
// EventHeader finished. It aliases the validator: use it before calling Next
// again.
func (v *Validator) Header() []byte {
	b := append(v.hdr[:0], '*')
	b = strconv.AppendInt(b, v.count, 10)
	return append(b, '\r', '\n')
}

// AppendInline appends, as a multibulk request, the inline request the last
// EventInline finished.
func (v *Validator) AppendInline(dst []byte) []byte { return v.inline.appendRequest(dst) }

// Next consumes a prefix of src and says what it was. It stops at the first
// event that changes what the caller must do: the end of a request, the end
// of a "*<n>" header read in pieces, or the end of src. On a violation it
// returns the error (one of this package's sentinels, possibly wrapped) and
// how many bytes preceded the offending one; every later call returns the
// same error.
func (v *Validator) Next(src []byte) (int, Event, error) {
	n, ev, err := v.next(src)
	v.pos += int64(n)
	return n, ev, err
}

func (v *Validator) next(src []byte) (int, Event, error) {
	if v.err != nil {
		return 0, EventSkip, v.err
	}
	var (
		n  int
		ev Event
	)
	switch v.state {
	case stIdle:
		if len(src) == 0 {
			return 0, EventSkip, nil
		}
		if src[0] != '*' {
			v.state = stInline
			v.inline.reset()
			n, ev, v.err = v.inline.next(src)
			break
		}
		if num, k := smallNumber(src, 1); k >= 0 && num <= v.maxArgs && src[k+1] == '\n' {
			// Fast path: a plain "*<n>\r\n" within the limits. It reads
			// exactly as Header would, so it passes through with the
			// arguments, sparing the caller a call per request.
			v.count, v.argsLeft = num, num
			v.state = stDollar
			v.startSpans()
			n, ev, v.err = v.nextBody(src[k+2:], v.pos+int64(k+2))
			return k + 2 + n, ev, v.err
		}
		v.state = stCount
		v.numLen = 0
		n, ev, v.err = v.nextCount(src, 1)
	case stCount, stCountLF:
		n, ev, v.err = v.nextCount(src, 0)
	case stInline:
		n, ev, v.err = v.inline.next(src)
	default:
		n, ev, v.err = v.nextBody(src, v.pos)
	}
	if ev == EventInline && !v.authed {
		if v.err = v.inlineUnauthError(); v.err != nil {
			return n - 1, EventSkip, v.err
		}
	}
	if ev == EventEmpty || ev == EventInline {
		v.state = stIdle
	}
	return n, ev, v.err
}

// inlineUnauthError applies the pre-AUTH limits to a finished inline
// request as they apply to a multibulk one: Redis checks only multibulk
// headers, which would let an unauthenticated client send through an
// inline line what it may not send as multibulk.
func (v *Validator) inlineUnauthError() error {
	ends := v.inline.ends
	if int64(len(ends)) > v.maxArgs {
		return ErrUnauthMultibulkLength
	}
	start := int32(0)
	for _, end := range ends {
		if int64(end-start) > v.maxBulk {
			return ErrUnauthBulkLength
		}
		start = end
	}
	return nil
}

// startSpans begins recording the arguments of a new multibulk request.
func (v *Validator) startSpans() {
	if cap(v.spans) > spansKeepCap {
		v.spans = nil
	}
	v.spans = v.spans[:0]
}

// nextCount reads the "*<n>\r\n" header from src[i:].
func (v *Validator) nextCount(src []byte, i int) (int, Event, error) {
	if v.state == stCount {
		j, num, ok, done, err := v.lineNumber(src, i, ErrTooBigMbulkCount, ErrInvalidMultibulkLength)
		if err != nil {
			return j, EventSkip, err
		}
		if !done {
			return j, EventSkip, nil
		}
		i = j
		switch {
		case !ok || num > v.limits.MaxArgs:
			return i - 1, EventSkip, ErrInvalidMultibulkLength
		case num > v.maxArgs:
			return i - 1, EventSkip, ErrUnauthMultibulkLength
		}
		v.count = num
		v.state = stCountLF
	}
	if i == len(src) {
		return i, EventSkip, nil
	}
	if src[i] != '\n' {
		return i, EventSkip, ErrInvalidMultibulkLength
	}
	i++
	if v.count <= 0 {
		v.state = stIdle
		return i, EventEmpty, nil
	}
	v.argsLeft = v.count
	v.state = stDollar
	v.startSpans()
	return i, EventHeader, nil
}

// lineNumber reads the number of a "*<n>" or "$<n>" line from src[i:]
// through its '\r'. done says whether the '\r' was reached; then num and ok
// are parseNumber's verdict and next is just past the '\r'. A '\n' before the
// '\r' is refused at once (invalid), as is a line longer than MaxInlineLen
// (tooBig); otherwise, like Redis, it waits for the '\r' before judging.
func (v *Validator) lineNumber(src []byte, i int, tooBig, invalid error) (next int, num int64, ok, done bool, err error) {
	if v.numLen == 0 {
		// Fast path: the whole number is in src; no need to copy it.
		end := min(len(src), i+maxNumLen+1)
		for k := i; k < end; k++ {
			c := src[k]
			if c == '\r' {
				num, ok = parseNumber(src[i:k])
				return k + 1, num, ok, true, nil
			}
			if c == '\n' {
				break
			}
		}
	}
	for ; i < len(src); i++ {
		c := src[i]
		switch c {
		case '\r':
			if v.numLen > maxNumLen {
				return i + 1, 0, false, true, nil
			}
			num, ok = parseNumber(v.num[:v.numLen])
			return i + 1, num, ok, true, nil
		case '\n':
			return i, 0, false, false, invalid
		}
		if v.numLen < maxNumLen {
			v.num[v.numLen] = c
		}
		v.numLen++
		// The '*' or '$' counts toward the line, as in Redis.
		if 1+v.numLen > v.limits.MaxInlineLen {
			return i, 0, false, false, tooBig
		}
	}
	return i, 0, false, false, nil
}

// bulkLenError is the error for a bulk length outside the limits in force.
func (v *Validator) bulkLenError(num int64, ok bool) error {
	if !ok || num < 0 || num > v.limits.MaxBulkLen {
		return ErrInvalidBulkLength
	}
	return ErrUnauthBulkLength
}

// nextBody reads the arguments of a multibulk request, which pass through;
// at is the stream offset of src[0].
func (v *Validator) nextBody(src []byte, at int64) (int, Event, error) {
	i := 0
	for i < len(src) {
		switch v.state {
		case stDollar:
			if src[i] != '$' {
				return i, EventBody, expectedDollar(src[i])
			}
			var (
				num int64
				k   = -1
				ok  bool
			)
			// The hot path, by hand (a call costs too much here): a
			// length of one or two digits, then "\r" and another byte.
			if i+4 < len(src) {
				d1, c2 := src[i+1]-'0', src[i+2]
				if d1-1 < 9 {
					if c2 == '\r' {
						num, k, ok = int64(d1), i+2, true
					} else if d2 := c2 - '0'; d2 <= 9 && src[i+3] == '\r' {
						num, k, ok = int64(d1)*10+int64(d2), i+3, true
					}
				}
			}
			if k < 0 {
				if num, k = smallNumber(src, i+1); k >= 0 {
					ok = true
				} else if k = shortLine(src, i+1); k >= 0 {
					num, ok = parseNumber(src[i+1 : k])
				}
			}
			if k >= 0 {
				// Fast path: the whole "$<n>\r\n" is in src.
				if !ok || num < 0 || num > v.maxBulk {
					return k, EventBody, v.bulkLenError(num, ok)
				}
				if src[k+1] != '\n' {
					return k + 1, EventBody, ErrInvalidBulkLength
				}
				i = k + 2
				v.spans = append(v.spans, span{at: at + int64(i), n: num})
				// num <= MaxBulkLenCeiling, so this cannot overflow.
				if end := i + int(num); end+2 <= len(src) {
					if src[end] != '\r' || src[end+1] != '\n' {
						return end, EventBody, ErrInvalidBulkLength
					}
					i = end + 2
					if v.argsLeft--; v.argsLeft == 0 {
						v.state = stIdle
						return i, EventBodyEnd, nil
					}
					continue
				}
				v.dataLeft = num
				v.state = stBulkData
				continue
			}
			v.state = stBulkLen
			v.numLen = 0
			i++
		case stBulkLen:
			j, num, ok, done, err := v.lineNumber(src, i, ErrTooBigBulkCount, ErrInvalidBulkLength)
			if err != nil {
				return j, EventBody, err
			}
			i = j
			if !done {
				return i, EventBody, nil
			}
			if !ok || num < 0 || num > v.maxBulk {
				return i - 1, EventBody, v.bulkLenError(num, ok)
			}
			v.dataLeft = num
			v.state = stBulkLenLF
		case stBulkLenLF:
			if src[i] != '\n' {
				return i, EventBody, ErrInvalidBulkLength
			}
			i++
			v.spans = append(v.spans, span{at: at + int64(i), n: v.dataLeft})
			v.state = stBulkData
		case stBulkData:
			if avail := int64(len(src) - i); avail < v.dataLeft {
				v.dataLeft -= avail
				return len(src), EventBody, nil
			}
			i += int(v.dataLeft)
			v.dataLeft = 0
			v.state = stBulkCR
		case stBulkCR:
			if src[i] != '\r' {
				return i, EventBody, ErrInvalidBulkLength
			}
			i++
			v.state = stBulkLF
		case stBulkLF:
			if src[i] != '\n' {
				return i, EventBody, ErrInvalidBulkLength
			}
			i++
			if v.argsLeft--; v.argsLeft == 0 {
				v.state = stIdle
				return i, EventBodyEnd, nil
			}
			v.state = stDollar
		}
	}
	return i, EventBody, nil
}

// shortLine finds the '\r' ending a header number that starts at src[i],
// provided the number is short enough for parseNumber to accept and the byte
// after the '\r' is in src too; otherwise it returns -1 and the caller takes
// the byte-at-a-time path, which reaches the same verdict.
func shortLine(src []byte, i int) int {
	end := min(len(src)-1, i+maxNumLen+1)
	for k := i; k < end; k++ {
		switch src[k] {
		case '\r':
			return k
		case '\n':
			return -1
		}
	}
	return -1
}

// smallNumber is the hot path of header parsing: a number of one to
// smallNumberLen digits without sign or leading zero (so parseNumber would
// accept it and it cannot overflow), starting at src[i] and followed by '\r'
// and at least one more byte. It returns the number and the index of the
// '\r', or k = -1 when the text is anything else.
func smallNumber(src []byte, i int) (num int64, k int) {
	if i >= len(src) {
		return 0, -1
	}
	c := src[i]
	if c < '1' || c > '9' {
		return 0, -1
	}
	num = int64(c - '0')
	end := min(len(src)-1, i+smallNumberLen)
	for k = i + 1; k < end; k++ {
		c = src[k]
		if c == '\r' {
			return num, k
		}
		if c < '0' || c > '9' {
			return 0, -1
		}
		num = num*10 + int64(c-'0')
	}
	return 0, -1
}

// smallNumberLen is the most digits smallNumber reads: 10^18 < 2^63.
const smallNumberLen = 18
