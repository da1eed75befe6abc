package decide

import (
	"errors"
	"strconv"
	"time"

	"github.com/sluice-rl/sluice/machine/room"
)

// Why a group refused a part of a check across groups, as its apply's
// room.Outcome.Refusal says (the error reply says it to people).
var (
	// ErrRulesDiffer: this group's rules for the domain are not the
	// coordinator's. Nothing was charged.
	ErrRulesDiffer = errors.New("machine: this group's rules for the domain differ from the coordinator's")
	// ErrHeldOther: the reservation id is held by a reserve of other
	// arguments. Nothing was charged.
	ErrHeldOther = errors.New("machine: the reservation id is held with other arguments")
	// ErrHeldElsewhere: a settle found the reservation's parts in slots
	// this group does not own (held across groups, or moved): the
	// coordinator settles it. Nothing was settled.
	ErrHeldElsewhere = errors.New("machine: the reservation's parts are held in other groups' slots")
	// ErrPartLate: the part arrived after its coordinator's deadline
	// (PartRequest.Deadline), which has cancelled it. Nothing was charged.
	ErrPartLate = errors.New("machine: the part arrived after its coordinator's deadline")
)

// PartKind is what a part asks of its group.
type PartKind uint8

const (
	// PartReserve decides the part as the group's share of a check and
	// holds what it charged under the part's id, for its ttl.
	PartReserve PartKind = iota + 1
	// PartDecide decides a whole check whose counters all sit in the
	// group, once.
	PartDecide
	// PartCancel gives back what a part's id holds in Slots (a slot where
	// nothing is held: a tombstone for its ttl).
	PartCancel
	// PartSettle settles a reservation's parts in Slots at Actual (Cancel:
	// gives everything back), and with WithHead its head too.
	PartSettle
	// PartHold keeps the head of a reservation across groups whose parts
	// every group admitted: Reply, and the parts' Slots.
	PartHold
)

// PartRequest is a part of a check across groups, as the coordinator
// builds it from Split and the member channel carries it: typed, never
// argument strings cut by offsets. Command is the entry the group logs.
type PartRequest struct {
	Kind PartKind
	// RLS: the check is RL.SHOULDRATELIMIT (its statuses are the result),
	// else RL.CHECK.
	RLS    bool
	Domain string
	// Rules is the digest of the domain's rules at the coordinator
	// (RulesDigest); Reserve and Decide.
	Rules string
	// ID and TTL (seconds) are the part's reservation's: Reserve and
	// Cancel.
	ID  string
	TTL int64
	// Head are the check's words between its domain and its first
	// descriptor (Split's head); Descriptors each descriptor's words.
	Head        [][]byte
	Descriptors [][][]byte
	// Slots are the slots of the reservation's parts: Cancel, Settle and
	// Hold.
	Slots []int
	// Actual is a Settle's actual cost; Cancel settles it for nothing
	// (RL.CANCEL). WithHead settles the head (kept in the domain's slot)
	// with the parts.
	Actual   int64
	Cancel   bool
	WithHead bool
	// Reply is the answer a Hold's head gives again to a retried reserve;
	// ArgsSum identifies the reserve's arguments (ReserveArgsSum).
	Reply   room.CheckResult
	ArgsSum uint64
	// Orders are a Reserve's descriptors' places in the whole reserve
	// (RL.RESERVE across groups: its settle lists the limits in them).
	Orders []int
	// Deadline (Unix ns; 0: none) is when the coordinator stops waiting
	// for a Reserve's answer and cancels it: the group refuses the part
	// after it (ErrPartLate), so a part held by a partition cannot charge
	// once the tombstone its cancel left is gone. It is checked where the
	// part enters the group's log, not logged (a member of an earlier
	// version would read a logged one differently).
	Deadline int64
}

// ErrBadPart: a part request that is not one (a kind unknown, no
// domain, no id where one is needed).
var ErrBadPart = errors.New("machine: not a part request")

// Command is the RL.PART entry the group logs for r.
func (r *PartRequest) Command() ([][]byte, error) {
	if r.Domain == "" {
		return nil, ErrBadPart
	}
	decision := "RL.CHECK"
	if r.RLS {
		decision = "RL.SHOULDRATELIMIT"
	}
	ttl := strconv.AppendInt(nil, r.TTL, 10)
	var cmd [][]byte
	slots := func(cmd [][]byte) [][]byte {
		for _, s := range r.Slots {
			cmd = append(cmd, strconv.AppendInt(nil, int64(s), 10))
		}
		return cmd
	}
	switch r.Kind {
	case PartCancel:
		if r.ID == "" || len(r.Slots) == 0 {
			return nil, ErrBadPart
		}
		return slots([][]byte{[]byte("RL.PART"), []byte("CANCEL"), []byte(r.Domain), []byte(r.ID), ttl}), nil
	case PartSettle:
		if r.ID == "" {
			return nil, ErrBadPart
		}
		actual, head := strconv.AppendInt(nil, r.Actual, 10), []byte("PARTS")
		if r.Cancel {
			actual = []byte("CANCEL")
		}
		if r.WithHead {
			head = []byte("HEAD")
		}
		return slots([][]byte{[]byte("RL.PART"), []byte("SETTLE"), []byte(r.Domain), []byte(r.ID), actual, head}), nil
	case PartHold:
		if r.ID == "" {
			return nil, ErrBadPart
		}
		cmd := [][]byte{[]byte("RL.PART"), []byte("HOLD"), []byte(r.Domain), []byte(r.ID), ttl, strconv.AppendUint(nil, r.ArgsSum, 10)}
		for _, v := range [...]int64{r.Reply.Limit, r.Reply.Remaining, r.Reply.RetryAfter, r.Reply.ResetAfter, r.Reply.Window} {
			cmd = append(cmd, strconv.AppendInt(nil, v, 10))
		}
		return slots(append(cmd, []byte(r.Reply.Name))), nil
	case PartReserve:
		if r.ID == "" {
			return nil, ErrBadPart
		}
		cmd = [][]byte{[]byte("RL.PART"), []byte("RESERVE"), []byte(r.Rules), []byte(r.ID), ttl}
		if len(r.Orders) > 0 {
			var o []byte
			for i, n := range r.Orders {
				if i > 0 {
					o = append(o, ',')
				}
				o = strconv.AppendInt(o, int64(n), 10)
			}
			cmd = append(cmd, []byte("ORDER"), o)
		}
	case PartDecide:
		cmd = [][]byte{[]byte("RL.PART"), []byte("DECIDE"), []byte(r.Rules)}
	default:
		return nil, ErrBadPart
	}
	cmd = append(cmd, []byte(decision), []byte(r.Domain))
	cmd = append(cmd, r.Head...)
	for _, d := range r.Descriptors {
		cmd = append(cmd, d...)
	}
	return cmd, nil
}

// Late is the refusal of a part that arrives at now (Unix ns) past its
// Deadline, or nil.
func (r *PartRequest) Late(now int64) error {
	if r.Deadline == 0 || now <= r.Deadline {
		return nil
	}
	late := time.Duration(now - r.Deadline).Round(time.Millisecond)
	return &PartError{Kind: ErrPartLate, Reply: "ERR the part arrived " + late.String() + " after its coordinator's deadline; nothing was charged"}
}

// PartResult is what a group answered a part: the same typed results the
// doors format (room.CheckResult, room.RLSStatus), from the apply's room.Outcome.
type PartResult struct {
	// Limited: the part refused (nothing charged).
	Limited bool
	// Check is RL.CHECK's result, Statuses RL.SHOULDRATELIMIT's.
	Check    room.CheckResult
	Statuses []room.RLSStatus
	// Held, for a cancel or settle: something was held and is given
	// back (Settled says how).
	Held    bool
	Settled []room.SettleRow
}

// PartOf reads a part's result from its apply's typed room.Outcome. An error
// answer is an error wrapping ErrFenced or ErrRulesDiffer when it is one
// of those (its text says the rest).
func PartOf(kind PartKind, out room.Outcome) (PartResult, error) {
	if out.Err != "" {
		if out.Refusal != nil {
			return PartResult{}, &PartError{Kind: out.Refusal, Reply: out.Err}
		}
		return PartResult{}, &PartError{Reply: out.Err}
	}
	switch kind {
	case PartCancel, PartSettle:
		return PartResult{Held: out.Held, Settled: out.Settled}, nil
	case PartHold:
		return PartResult{Check: out.Check}, nil
	}
	return PartResult{Limited: out.Limited, Check: out.Check, Statuses: out.Statuses}, nil
}

// PartError is a part a group answered with an error: nothing was
// charged. Kind is ErrFenced, ErrRulesDiffer or nil (another refusal);
// Reply the error reply's text, for people.
type PartError struct {
	Kind  error
	Reply string
}

func (e *PartError) Error() string { return e.Reply }
func (e *PartError) Unwrap() error { return e.Kind }
