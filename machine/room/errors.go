package room

import (
	"errors"
	"strings"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/resp"
)

// WholeReply is an error whose text is its whole error reply (a fence's
// TRYAGAIN), not a message to prefix with ERR.
type WholeReply interface {
	error
	WholeReply() string
}

// ErrorReply turns an error from an algorithm or the keyspace into a RESP
// error: WRONGTYPE for a key of another kind, a WholeReply's own text, else
// "ERR" and the message without its package prefix ("gcra: zero rates …"
// → "ERR zero rates …").
func ErrorReply(err error) string {
	if errors.Is(err, keyspace.ErrWrongType) {
		return resp.ErrWrongType
	}
	var whole WholeReply
	if errors.As(err, &whole) {
		return whole.WholeReply()
	}
	return "ERR " + WithoutPackage(err)
}

// WithoutPackage is err's message without its package prefix ("gcra: zero
// rates …" → "zero rates …"), for a reply that says it in its own words.
func WithoutPackage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": "); i > 0 && !strings.ContainsAny(msg[:i], " ") {
		msg = msg[i+2:]
	}
	return msg
}

// FenceError is a refusal for a slot this group does not own (a slot
// being moved, or another group's); its text is the whole error reply,
// and an apply answers it as ErrFenced.
type FenceError string

func (e FenceError) Error() string { return string(e) }

// WholeReply is its text: the whole reply.
func (e FenceError) WholeReply() string { return string(e) }
