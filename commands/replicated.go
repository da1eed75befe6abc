package commands

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/member"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/shardmap"
	"github.com/sluice-rl/sluice/slot"
)

// Replicated applies machine commands through a replicated log: on the
// leader a command's reply is the one its entry produced when it applied,
// after commit; a follower, or a leader not yet serving, redirects the
// client (-MOVED to the leader, -CLUSTERDOWN with none known) and applies
// nothing.
type Replicated struct {
	Node *cluster.Node
	// Shards, on a member of a sharded cluster, sends a client asking about
	// a slot another group owns to that group (MOVED), and Fenced reports
	// whether this group's state machine fences by the map yet (keyed
	// commands wait, TRYAGAIN, until it does). Both nil otherwise.
	Shards *shardmap.Router
	Fenced func() bool
}

// Apply is one command's trip through the log.
func (r Replicated) Apply(_ int64, cmd *machine.Command, args [][]byte, w *resp.Writer) machine.Outcome {
	if to := r.Redirect(cmd, args); to != nil {
		w.Error(to.Reply)
		return refusedOutcome(to)
	}
	reply, err := r.ApplyAll([][][]byte{args})
	if err != nil {
		msg := r.ErrorReply(err, commandKey(cmd, args))
		w.Error(msg.Error())
		return refusedOutcome(msg)
	}
	b, out := reply(0)
	w.Buf = appendMachineReply(w.Buf, w.Proto, b)
	return out
}

// Redirect sends the client to the leader unless this node serves; on a
// sharded member, keys of more than one slot are CROSSSLOT, and a slot
// another group owns goes to that group.
func (r Replicated) Redirect(cmd *machine.Command, args [][]byte) *machine.Redirect {
	if r.Shards != nil && cmd != nil && cmd.MultiKey() {
		if to := crossSlot(cmd.Keys(args), args); to != nil {
			return to
		}
	}
	return r.RedirectKey(commandKey(cmd, args))
}

// crossSlot is CROSSSLOT when the keys at keys hash to more than one slot
// (a refusal of no kind: asked again, it is refused again).
func crossSlot(keys []int, args [][]byte) *machine.Redirect {
	for i := 1; i < len(keys); i++ {
		if slot.Of(args[keys[i]]) != slot.Of(args[keys[0]]) {
			return &machine.Redirect{Reply: "CROSSSLOT Keys in request don't hash to the same slot"}
		}
	}
	return nil
}

// RedirectKey sends a client asking about key (nil: a command with no key)
// to the leader unless this node serves: MOVED names key's slot. On a
// sharded member a key of another group's slot goes to that group, and
// keyed commands wait until the group fences by the map.
func (r Replicated) RedirectKey(key []byte) *machine.Redirect {
	if r.Shards != nil && key != nil {
		s := slot.Of(key)
		if c, ok := r.Shards.Conflict(s); ok {
			return machine.ClusterDown(conflictWhy(r.Shards.Describe(c)))
		}
		switch addr, mine := r.Shards.Route(s); {
		case mine:
		case addr == "":
			// The owner group's leader is not known here: it is electing
			// one, it is down, or this member does not hear it (a cut one
			// way). The slot is MOVED to the member CLUSTER SLOTS places it
			// on (standIn: its last leader or a member that answers), as
			// Redis Cluster's MOVED names the node its table gives: that
			// group answers for itself (CLUSTERDOWN from a member of it
			// that knows no leader either).
			g := r.Shards.Owner(s)
			if stand := standIn(r.Shards.Map().Groups[g].Members, r.Shards.LastLeader(g), r.Shards.Answered(g)); stand != "" {
				return machine.Moved(s, stand)
			}
			return machine.ClusterDown("The cluster is down")
		default:
			return machine.Moved(s, addr)
		}
	}
	if !r.Node.Serving() {
		return r.redirect(key)
	}
	if r.Fenced != nil && key != nil && !r.Fenced() {
		return machine.TryAgain("the group is taking its slots from the cluster map")
	}
	return nil
}

// ApplyAll logs cmds as one group of the next entry and waits for it.
func (r Replicated) ApplyAll(cmds [][][]byte) (func(i int) ([]byte, machine.Outcome), error) {
	p := r.Node.Submit(cmds)
	if err := p.Wait(); err != nil {
		return nil, err
	}
	return p.Reply, nil
}

// commandKey is the key a command is routed by: its first declared key
// (nil when it has none).
func commandKey(cmd *machine.Command, args [][]byte) []byte {
	if cmd == nil {
		return nil
	}
	return cmd.RouteKey(args)
}

// redirect is the reply that sends a client asking about key to the
// leader.
func (r Replicated) redirect(key []byte) *machine.Redirect {
	id, addr, ok := r.Node.Leader()
	switch {
	case !ok || addr == "":
		return machine.ClusterDown("The cluster is down")
	case id == r.Node.Self():
		// Elected, not serving yet (its barrier is running): soon.
		return machine.TryAgain("the leader is starting")
	}
	s := 0
	if key != nil {
		s = slot.Of(key)
	}
	return machine.Moved(s, addr)
}

// ErrorReply is the reply to a command asking about key whose batch did
// not apply, or whose outcome this node cannot know: never an admission.
func (r Replicated) ErrorReply(err error, key []byte) error {
	switch {
	case errors.Is(err, cluster.ErrNotLeader), errors.Is(err, cluster.ErrNoLeader):
		return r.redirect(key)
	case errors.Is(err, cluster.ErrTransferring):
		return machine.TryAgain("leadership is moving to another member; nothing was applied")
	case errors.Is(err, cluster.ErrNotApplied):
		return machine.TryAgain("the leader changed before this applied; nothing was applied")
	case errors.Is(err, cluster.ErrUnknownOutcome):
		return replyError{"ERR the outcome is unknown: the change may or may not have applied (" + err.Error() + ")", machine.ReasonUnknown}
	}
	// The log failed in a way it did not say: whether it applied is not
	// known.
	return replyError{errorReply(err), machine.ReasonUnknown}
}

// replyError is an error reply's text (without the '-') that is no
// redirect, and why.
type replyError struct {
	msg    string
	reason machine.Reason
}

func (e replyError) Error() string { return e.msg }

// refusedOutcome is the outcome of a command the log did not take, or
// took without saying what became of it: err is ErrorReply's, or a
// redirect.
func refusedOutcome(err error) machine.Outcome {
	out := machine.Outcome{Err: err.Error(), Refusal: refusalOf(err), Reason: machine.ReasonInvalid}
	var re replyError
	switch {
	case out.Refusal != nil:
		out.Reason = machine.ReasonNotNow // MOVED, TRYAGAIN, CLUSTERDOWN
	case errors.As(err, &re):
		out.Reason = re.reason
	}
	return out
}

// refusalOf is what an Outcome carries as the refusal for an error reply
// err: the redirect, or nil for another reply (a CROSSSLOT, an ERR) —
// never a typed nil.
func refusalOf(err error) error {
	if to, ok := err.(*machine.Redirect); ok && to != nil && to.Kind != nil {
		return to
	}
	return nil
}

// applyHere logs one command when this node leads and returns its reply
// and typed outcome; ok is false when it does not (nothing was logged:
// the caller asks the leader).
func (r Replicated) applyHere(args [][]byte) (reply []byte, out machine.Outcome, ok bool, err error) {
	if !r.Node.Serving() {
		return nil, out, false, nil
	}
	get, err := r.ApplyAll([][][]byte{args})
	switch {
	case errors.Is(err, cluster.ErrNotLeader), errors.Is(err, cluster.ErrNoLeader), errors.Is(err, cluster.ErrTransferring):
		return nil, out, false, nil
	case err != nil:
		return nil, out, true, err
	}
	reply, out = get(0)
	return reply, out, true, nil
}

// ApplyOne logs one command; it fails unless this node leads, or when
// the command answered an error (*machine.ReplyError, typed).
func (r Replicated) ApplyOne(args [][]byte) error {
	get, err := r.ApplyAll([][][]byte{args})
	if err != nil {
		return err
	}
	if _, out := get(0); out.Err != "" {
		return &machine.ReplyError{Reason: out.Reason, Reply: out.Err}
	}
	return nil
}

// ApplyForMember applies a command another member sent (configuration
// for every group, a slot's import; package member) through this group's
// log and returns its reply: only the commands members send each other,
// checked as a client's are before they enter the log. Its errors wrap
// member's sentinels (a not-leader one comes with the leader's client
// address this node knows), or are the applied command's typed refusal
// (an import's *machine.StaleEpochError) — a member.Applier.
func (r Replicated) ApplyForMember(args [][]byte) (reply []byte, leader string, err error) {
	reply, out, leader, err := r.applyForMember(args)
	var stale *machine.StaleEpochError
	if err == nil && errors.As(out.Refusal, &stale) {
		return nil, "", stale
	}
	return reply, leader, err
}

func (r Replicated) applyForMember(args [][]byte) (reply []byte, out machine.Outcome, leader string, err error) {
	m := r.Node.Machine()
	cmd := m.Lookup(args[0])
	switch {
	case cmd == nil || !cmd.FromMember():
		return nil, out, "", fmt.Errorf("%w: %q is not a command members send", member.ErrRefused, resp.Clip(args[0], 64))
	case !cmd.ArityOK(len(args)):
		return nil, out, "", fmt.Errorf("%w: wrong number of arguments for %s", member.ErrRefused, cmd.Name)
	}
	if bad := cmd.Check(args); bad != "" {
		return nil, out, "", fmt.Errorf("%w: %s", member.ErrRefused, bad)
	}
	reply, out, ok, err := r.applyHere(args)
	switch {
	case !ok && err == nil:
		_, leader, _ := r.Node.Leader()
		return nil, out, leader, member.ErrNotLeader
	case errors.Is(err, cluster.ErrNotApplied), errors.Is(err, cluster.ErrTransferring):
		return nil, out, "", fmt.Errorf("%w: %w", member.ErrNotApplied, err)
	case err != nil:
		return nil, out, "", fmt.Errorf("%w: %w", member.ErrUnknownOutcome, err)
	}
	return reply, out, "", nil
}

// Place logs a placement request another member sent (or this member's
// own group's, LocalPlace) through this group's log, checked as a
// client's command is: its typed result from the apply's outcome, no
// reply read — a member.PlaceFunc.
func (r Replicated) Place(req *machine.PlacementRequest) (machine.PlacementResult, string, error) {
	args, err := req.Command()
	if err != nil {
		return machine.PlacementResult{}, "", fmt.Errorf("%w: %w", member.ErrRefused, err)
	}
	_, out, leader, err := r.applyForMember(args)
	if err != nil {
		return machine.PlacementResult{}, leader, err
	}
	res, err := machine.PlacementOf(out)
	if err == nil && req.Kind == machine.PlaceDigest {
		res.Config, err = r.Node.Machine().ConfigDigest()
	}
	return res, "", err
}

// LocalPlace is Place for this member's own group: ok false when this
// member does not lead it (nothing was logged).
func (r Replicated) LocalPlace(req *machine.PlacementRequest) (machine.PlacementResult, bool, error) {
	res, _, err := r.Place(req)
	if errors.Is(err, member.ErrNotLeader) {
		return res, false, nil
	}
	return res, true, err
}

// Part decides a part of a check across groups here, as its group's
// leader (the coordinator's own group's part, or one another member sent):
// its typed result from the apply's outcome, no reply decoded.
func (r Replicated) Part(req *machine.PartRequest) (machine.PartResult, string, error) {
	if err := req.Late(time.Now().UnixNano()); err != nil {
		return machine.PartResult{}, "", err // before the log: nothing charged
	}
	cmd, err := req.Command()
	if err != nil {
		return machine.PartResult{}, "", fmt.Errorf("%w: %w", member.ErrRefused, err)
	}
	_, out, leader, err := r.applyForMember(cmd)
	if err != nil {
		return machine.PartResult{}, leader, err
	}
	res, err := machine.PartOf(req.Kind, out)
	return res, "", err
}

// Report is what this member knows of its group, for the other groups'
// members (member.Report): whether it leads, its log's time, and the
// slots and migrations its group's log holds — what INFO cluster shows
// people.
func (r Replicated) Report(now time.Time) member.Report {
	m := r.Node.Machine()
	rep := member.Report{Leader: r.Node.Serving(), LogTime: m.Applied(), Level: machine.Level}
	if o := m.Owned(); o != nil {
		rep.Fenced = true
		rep.Slots = shardmap.Report{Epoch: o.Epoch, Ranges: o.SlotRanges(), Jobs: ownJobViews(o, now)}
	}
	return rep
}

// LocalPart is Part for the coordinator's own group: ok is false when this
// node does not lead (nothing was logged; the coordinator asks the
// leader).
func (r Replicated) LocalPart(req *machine.PartRequest) (machine.PartResult, bool, error) {
	res, _, err := r.Part(req)
	if errors.Is(err, member.ErrNotLeader) {
		return res, false, nil
	}
	return res, true, err
}

// conflictWhy is the CLUSTERDOWN text for a slot two groups claim at one
// epoch (what shardmap.Router.Describe says), with what to do.
func conflictWhy(described string) string {
	return described + ": no group decides for them until one is given them at a later epoch" +
		" (a member was started with a map that splits the slots differently at the same epoch; stop it, see CLUSTER INFO)"
}
