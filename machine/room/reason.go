package room

import "strconv"

// Reason is why a command answered an error instead of its result, typed,
// so a door that is not RESP picks its protocol's code (a gRPC code, an
// HTTP status) from it and never from the error's text. The text
// (Outcome.Err) is for people, and is what the RESP door writes.
type Reason uint8

const (
	// ReasonNone: no error — or one nothing typed, which a door must take
	// as an outcome it cannot know.
	ReasonNone Reason = iota
	// ReasonInvalid: the command or its arguments are wrong for it (ERR
	// …): sent again, it fails again. Nothing was applied.
	ReasonInvalid
	// ReasonWrongType: a key holds another kind of state (WRONGTYPE).
	ReasonWrongType
	// ReasonInternal: the command panicked inside its apply (an internal
	// error); nothing it did was kept.
	ReasonInternal
	// ReasonNotNow: nothing was applied, and the same command a moment
	// later may be: TRYAGAIN, CLUSTERDOWN, MOVED, LOADING, a change the
	// disk cannot take now.
	ReasonNotNow
	// ReasonRulesDiffer: the groups of a sharded cluster hold different
	// rules for the command's domain. Nothing was applied.
	ReasonRulesDiffer
	// ReasonOutOfMemory: over maxmemory, the command would store more
	// (OOM). Nothing was applied.
	ReasonOutOfMemory
	// ReasonUnknown: whether the command was applied is not known (a
	// group did not answer): it may have been charged.
	ReasonUnknown
)

var reasonNames = [...]string{"none", "invalid", "wrong-type", "internal", "not-now", "rules-differ", "out-of-memory", "unknown"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// ReplyError is an applied command's error answer as an error: why, and
// the reply's text (without the '-'), for people.
type ReplyError struct {
	Reason Reason
	Reply  string
}

func (e *ReplyError) Error() string { return e.Reply }
