package machine

import (
	"errors"
	"strings"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/resp"
)

// ErrFenced: a counter's slot is not this group's (a slot moved; the
// coordinator's map is behind). Nothing was charged. A fenced apply's
// Outcome.Refusal.
var ErrFenced = errors.New("machine: a counter's slot is not this group's")

// ErrorReply turns an error from an algorithm or the keyspace into a RESP
// error: WRONGTYPE for a key of another kind, else "ERR" and the message
// without its package prefix ("gcra: zero rates …" → "ERR zero rates …").
func ErrorReply(err error) string {
	if errors.Is(err, keyspace.ErrWrongType) {
		return resp.ErrWrongType
	}
	var fe fenceError
	if errors.As(err, &fe) {
		return string(fe)
	}
	return "ERR " + withoutPackage(err)
}

// withoutPackage is err's message without its package prefix ("gcra: zero
// rates …" → "zero rates …"), for a reply that says it in its own words.
func withoutPackage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": "); i > 0 && !strings.ContainsAny(msg[:i], " ") {
		msg = msg[i+2:]
	}
	return msg
}
