package machine

import "github.com/sluice-rl/sluice/machine/room"

// Reason is why a command answered an error instead of its result, typed
// (room.Reason: the rooms answer with it too).
type Reason = room.Reason

// The reasons (see room.Reason).
const (
	ReasonNone        = room.ReasonNone
	ReasonInvalid     = room.ReasonInvalid
	ReasonWrongType   = room.ReasonWrongType
	ReasonInternal    = room.ReasonInternal
	ReasonNotNow      = room.ReasonNotNow
	ReasonRulesDiffer = room.ReasonRulesDiffer
	ReasonOutOfMemory = room.ReasonOutOfMemory
	ReasonUnknown     = room.ReasonUnknown
)

// ReplyError is an applied command's error answer as an error: why, and
// the reply's text.
type ReplyError = room.ReplyError
