package resp

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Reading a RESP2 reply back, as a client would: what a node reads of a
// reply its own log produced for a command it sent itself (a check's part
// for its own group), and what a simulation reads of its members'.

// ReplyError is an error reply, without its '-'. Its RedisError method
// makes go-redis treat it as a server's answer (redis.Error), not a
// transport failure.
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// RedisError marks the error a server's reply.
func (ReplyError) RedisError() {}

// ErrNull is a null reply ($-1 or *-1).
var ErrNull = errors.New("resp: null reply")

// ErrMalformedReply: bytes that are not one RESP2 reply.
var ErrMalformedReply = errors.New("resp: malformed reply")

// DecodeReply reads one RESP2 reply as go-redis decodes one: int64, string
// (simple or bulk), []any (a null element nil, an error element its
// ReplyError); a top-level null is ErrNull, an error reply a ReplyError.
func DecodeReply(b []byte) (any, error) {
	v, rest, err := decodeReply(b, 0)
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%w: %d bytes after the reply", ErrMalformedReply, len(rest))
	}
	return v, err
}

// maxReplyDepth bounds nested arrays.
const maxReplyDepth = 16

func decodeReply(b []byte, depth int) (any, []byte, error) {
	end := bytes.Index(b, []byte("\r\n"))
	if end < 1 || depth > maxReplyDepth {
		return nil, nil, ErrMalformedReply
	}
	line, rest := string(b[1:end]), b[end+2:]
	switch b[0] {
	case '+':
		return line, rest, nil
	case '-':
		return nil, rest, ReplyError(line)
	case ':':
		n, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			return nil, nil, ErrMalformedReply
		}
		return n, rest, nil
	case '$':
		n, err := strconv.Atoi(line)
		if err != nil || n < -1 || (n >= 0 && len(rest) < n+2) {
			return nil, nil, ErrMalformedReply
		}
		if n == -1 {
			return nil, rest, ErrNull
		}
		return string(rest[:n]), rest[n+2:], nil
	case '*':
		n, err := strconv.Atoi(line)
		if err != nil || n < -1 || n > len(rest) {
			return nil, nil, ErrMalformedReply
		}
		if n == -1 {
			return nil, rest, ErrNull
		}
		out := make([]any, n)
		for i := range out {
			var v any
			v, rest, err = decodeReply(rest, depth+1)
			var e ReplyError
			switch {
			case errors.Is(err, ErrNull):
				v, err = nil, nil
			case errors.As(err, &e):
				v, err = e, nil
			case err != nil:
				return nil, nil, err
			}
			out[i] = v
		}
		return out, rest, nil
	}
	return nil, nil, ErrMalformedReply
}
