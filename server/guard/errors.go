package guard

import (
	"errors"
	"strings"
)

// Protocol violations and configuration errors. After the "guard: " prefix,
// each protocol violation reads exactly as the reason Redis prints after
// "Protocol error: ", so the reply a client gets is the one Redis would send.
var (
	// ErrInvalidMultibulkLength: a "*<n>" header that is not a number, is
	// above Limits.MaxArgs, or does not end in "\r\n".
	ErrInvalidMultibulkLength = errors.New("guard: invalid multibulk length")
	// ErrInvalidBulkLength: a "$<n>" header that is not a number, is
	// negative, is above Limits.MaxBulkLen or does not end in "\r\n", or a
	// bulk whose payload is not followed by "\r\n".
	ErrInvalidBulkLength = errors.New("guard: invalid bulk length")
	// ErrExpectedDollar: an argument of a multibulk request does not start
	// with '$'. Returned wrapped, with the offending byte: "expected '$', got 'X'".
	ErrExpectedDollar = errors.New("guard: expected '$'")
	// ErrTooBigInline: an inline line longer than Limits.MaxInlineLen, or
	// with more than Limits.MaxArgs words.
	ErrTooBigInline = errors.New("guard: too big inline request")
	// ErrTooBigMbulkCount: a "*<n>" header line longer than Limits.MaxInlineLen.
	ErrTooBigMbulkCount = errors.New("guard: too big mbulk count string")
	// ErrTooBigBulkCount: a "$<n>" header line longer than Limits.MaxInlineLen.
	ErrTooBigBulkCount = errors.New("guard: too big bulk count string")
	// ErrUnbalancedQuotes: an inline line that Redis' argument splitter
	// rejects (an unterminated quote, or a closing quote not followed by a space).
	ErrUnbalancedQuotes = errors.New("guard: unbalanced quotes in request")
	// ErrUnauthMultibulkLength: before authentication, a request of more
	// than Limits.UnauthMaxArgs arguments.
	ErrUnauthMultibulkLength = errors.New("guard: unauthenticated multibulk length")
	// ErrUnauthBulkLength: before authentication, a bulk longer than
	// Limits.UnauthMaxBulkLen.
	ErrUnauthBulkLength = errors.New("guard: unauthenticated bulk length")
	// ErrInvalidLimits: a Limits field outside its documented range.
	ErrInvalidLimits = errors.New("guard: invalid limits")
)

// errPrefix is what every sentinel message starts with.
const errPrefix = "guard: "

// expectedDollar is ErrExpectedDollar with the byte found, spelled as Redis
// spells it. Redis blanks CR and LF in error replies so the reply stays one
// line; so does this.
func expectedDollar(got byte) error {
	if got == '\r' || got == '\n' {
		got = ' '
	}
	return &gotError{got: got}
}

// gotError carries the byte of an ErrExpectedDollar without fmt, whose %c
// would re-encode bytes above 0x7f as UTF-8.
type gotError struct{ got byte }

func (e *gotError) Error() string {
	return ErrExpectedDollar.Error() + ", got '" + string([]byte{e.got}) + "'"
}

func (e *gotError) Unwrap() error { return ErrExpectedDollar }

// AppendReply appends the RESP error a client receives for a protocol
// violation: "-ERR Protocol error: <reason>\r\n", the reason as Redis
// words it.
func AppendReply(dst []byte, err error) []byte {
	dst = append(dst, "-ERR Protocol error: "...)
	dst = append(dst, strings.TrimPrefix(err.Error(), errPrefix)...)
	return append(dst, '\r', '\n')
}
