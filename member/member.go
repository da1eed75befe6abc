// Package member is the channel members of a sluice cluster call each
// other on: the member port every member already listens on for Raft
// (package raftmux names each connection's purpose), gRPC with the typed
// messages of package memberpb, and with a cluster secret a proof of
// membership (package memberauth) before either end hears a byte. A
// client door never carries what only a member may ask.
//
// Server serves a member's calls; Client makes them, keeping one
// connection per member. What a call became crosses as a code, and is a
// sentinel error on either side: ErrNotLeader, ErrNotApplied and
// ErrRefused say nothing was applied, ErrUnknownOutcome that it may have
// been.
package member

import (
	"errors"

	"github.com/sluice-rl/sluice/memberpb"
)

// Errors: what became of a call that was not simply applied.
var (
	// ErrNotLeader: not applied; the member does not lead its group.
	ErrNotLeader = errors.New("member: not the group's leader; nothing was applied")
	// ErrWrongGroup: not applied; the member is not of the group named.
	ErrWrongGroup = errors.New("member: not a member of the group named; nothing was applied")
	// ErrRefused: not applied; not a command members send, or malformed.
	ErrRefused = errors.New("member: refused; nothing was applied")
	// ErrNotApplied: not applied; the group could not apply it now.
	ErrNotApplied = errors.New("member: the group could not apply it now; nothing was applied")
	// ErrUnknownOutcome: the call may or may not have applied (logged
	// without a known result, or its answer was lost).
	ErrUnknownOutcome = errors.New("member: the outcome is unknown")
	// ErrUnreachable: the member could not be reached; nothing was sent.
	ErrUnreachable = errors.New("member: unreachable; nothing was sent")
)

// NothingApplied reports whether err says the call was not applied: it
// can be sent again, and no charge of it needs giving back.
func NothingApplied(err error) bool {
	for _, e := range []error{ErrNotLeader, ErrWrongGroup, ErrRefused, ErrNotApplied, ErrUnreachable} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// wireCodes are the sentinels' codes on the wire.
var wireCodes = []struct {
	code memberpb.Code
	err  error
}{
	{memberpb.Code_NOT_LEADER, ErrNotLeader},
	{memberpb.Code_WRONG_GROUP, ErrWrongGroup},
	{memberpb.Code_REFUSED, ErrRefused},
	{memberpb.Code_NOT_APPLIED, ErrNotApplied},
	{memberpb.Code_UNKNOWN_OUTCOME, ErrUnknownOutcome},
}

// codeOf is err's code (UNKNOWN_OUTCOME for an error of no known kind: a
// call that failed so cannot say it did not apply).
func codeOf(err error) memberpb.Code {
	for _, c := range wireCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return memberpb.Code_UNKNOWN_OUTCOME
}

// errOf is the sentinel of a code (nil for APPLIED; ErrUnknownOutcome for
// a code this version does not know).
func errOf(code memberpb.Code) error {
	if code == memberpb.Code_APPLIED {
		return nil
	}
	for _, c := range wireCodes {
		if c.code == code {
			return c.err
		}
	}
	return ErrUnknownOutcome
}
