package machine

import (
	"errors"
	"strconv"
)

// Where a command goes when a member did not apply it: the three refusals
// Redis Cluster clients act on. A door writes Redirect.Reply; members and
// the gRPC door act on the kind (errors.Is), never on the text.
var (
	// ErrMoved: another member answers for the command's slot (its group's
	// leader, or another group's). Nothing was applied.
	ErrMoved = errors.New("machine: another member answers for the slot; nothing was applied")
	// ErrTryAgain: nothing was applied, and the same command a moment later
	// may be (a leader starting, a slot being moved, a leader change).
	ErrTryAgain = errors.New("machine: not now; nothing was applied")
	// ErrClusterDown: no leader is known for the command's slot. Nothing
	// was applied.
	ErrClusterDown = errors.New("machine: no leader is known for the slot; nothing was applied")
)

// Redirect is a command a member did not apply, and where to ask: Kind is
// ErrMoved (Slot and Addr say where), ErrTryAgain or ErrClusterDown; Reply
// is the error reply a client door writes (without the '-').
type Redirect struct {
	Kind  error
	Slot  int
	Addr  string
	Reply string
}

func (r *Redirect) Error() string { return r.Reply }
func (r *Redirect) Unwrap() error { return r.Kind }

// Moved sends the client to addr, which answers for slot.
func Moved(slot int, addr string) *Redirect {
	return &Redirect{Kind: ErrMoved, Slot: slot, Addr: addr, Reply: "MOVED " + strconv.Itoa(slot) + " " + addr}
}

// TryAgain asks the client to send the command again; why says to people
// what is going on.
func TryAgain(why string) *Redirect {
	return &Redirect{Kind: ErrTryAgain, Reply: "TRYAGAIN " + why}
}

// ClusterDown says no leader is known for the command's slot; why is the
// rest of the reply ("The cluster is down", as Redis says it).
func ClusterDown(why string) *Redirect {
	return &Redirect{Kind: ErrClusterDown, Reply: "CLUSTERDOWN " + why}
}

// MovedTo is where a refusal sends the command: a MOVED's address, or ""
// (any other refusal, or none).
func MovedTo(refusal error) string {
	var r *Redirect
	if errors.As(refusal, &r) && r.Kind == ErrMoved {
		return r.Addr
	}
	return ""
}

// Retryable reports a refusal after which the same command a moment later
// may apply, nothing having been charged: TRYAGAIN, or a counter's slot
// this group has just given away (ErrFenced; the router sends it where the
// slot is now).
func Retryable(refusal error) bool {
	return errors.Is(refusal, ErrTryAgain) || errors.Is(refusal, ErrFenced)
}
