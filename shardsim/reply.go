package shardsim

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// errReply is an error reply, as go-redis hands one back (a redis.Error).
type errReply string

func (e errReply) Error() string { return string(e) }

// RedisError marks it a server's reply, not a transport error.
func (errReply) RedisError() {}

var _ redis.Error = errReply("")

// errMalformed: a reply that is not RESP2.
var errMalformed = errors.New("shardsim: malformed reply")

// decode reads one RESP2 reply as go-redis decodes it: int64, string,
// []any, redis.Nil for a null, an errReply for an error reply.
func decode(b []byte) (any, error) {
	v, rest, err := decodeOne(b)
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("%w: %d bytes after the reply", errMalformed, len(rest))
	}
	return v, err
}

func decodeOne(b []byte) (any, []byte, error) {
	end := bytes.Index(b, []byte("\r\n"))
	if end < 1 {
		return nil, nil, errMalformed
	}
	line, rest := string(b[1:end]), b[end+2:]
	switch b[0] {
	case '+':
		return line, rest, nil
	case '-':
		return nil, rest, errReply(line)
	case ':':
		n, err := strconv.ParseInt(line, 10, 64)
		return n, rest, err
	case '$':
		n, err := strconv.Atoi(line)
		if err != nil || n < -1 || (n >= 0 && len(rest) < n+2) {
			return nil, nil, errMalformed
		}
		if n == -1 {
			return nil, rest, redis.Nil
		}
		return string(rest[:n]), rest[n+2:], nil
	case '*':
		n, err := strconv.Atoi(line)
		if err != nil || n < -1 {
			return nil, nil, errMalformed
		}
		if n == -1 {
			return nil, rest, redis.Nil
		}
		out := make([]any, n)
		for i := range out {
			var v any
			v, rest, err = decodeOne(rest)
			switch {
			case errors.Is(err, redis.Nil):
				v, err = nil, nil
			case err != nil:
				var e errReply
				if !errors.As(err, &e) {
					return nil, nil, err
				}
				v, err = e, nil // an error inside an array is an element
			}
			out[i] = v
		}
		return out, rest, nil
	}
	return nil, nil, errMalformed
}
