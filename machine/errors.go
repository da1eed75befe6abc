package machine

import (
	"errors"

	"github.com/sluice-rl/sluice/machine/room"
)

// ErrFenced: a counter's slot is not this group's (a slot moved; the
// coordinator's map is behind). Nothing was charged. A fenced apply's
// Outcome.Refusal.
var ErrFenced = errors.New("machine: a counter's slot is not this group's")

// ErrorReply turns an error from an algorithm or the keyspace into a RESP
// error (room.ErrorReply).
func ErrorReply(err error) string { return room.ErrorReply(err) }
