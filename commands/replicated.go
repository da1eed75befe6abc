package commands

import (
	"errors"
	"strconv"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// Replicated applies machine commands through a replicated log: on the
// leader a command's reply is the one its entry produced when it applied,
// after commit; a follower, or a leader not yet serving, redirects the
// client (-MOVED to the leader, -CLUSTERDOWN with none known) and applies
// nothing.
type Replicated struct{ Node *cluster.Node }

// Apply is one command's trip through the log.
func (r Replicated) Apply(_ int64, cmd *machine.Command, args [][]byte, w *resp.Writer) machine.Outcome {
	if !r.Node.Serving() {
		w.Error(r.redirect(cmd, args))
		return machine.Outcome{}
	}
	p := r.Node.Submit([][][]byte{args})
	if err := p.Wait(); err != nil {
		w.Error(r.errorReply(err, cmd, args))
		return machine.Outcome{}
	}
	reply, limited := p.Reply(0)
	appendReply(w, reply)
	return machine.Outcome{Limited: limited}
}

// appendReply appends a reply the log produced in RESP2 in w's protocol:
// machine replies differ between the two only in a top-level null.
func appendReply(w *resp.Writer, reply []byte) {
	if w.Proto == 3 && (string(reply) == "$-1\r\n" || string(reply) == "*-1\r\n") {
		w.Null()
		return
	}
	w.Buf = append(w.Buf, reply...)
}

// redirect is the reply that sends a client to the leader.
func (r Replicated) redirect(cmd *machine.Command, args [][]byte) string {
	id, addr, ok := r.Node.Leader()
	switch {
	case !ok || addr == "":
		return "CLUSTERDOWN The cluster is down"
	case id == r.Node.Self():
		// Elected, not serving yet (its barrier is running): soon.
		return "TRYAGAIN the leader is starting"
	}
	s := 0
	if cmd.FirstKey > 0 && cmd.FirstKey < len(args) {
		s = slot.Of(args[cmd.FirstKey])
	}
	return "MOVED " + strconv.Itoa(s) + " " + addr
}

// errorReply is the reply for a batch that did not apply, or whose
// outcome this node cannot know: never an admission.
func (r Replicated) errorReply(err error, cmd *machine.Command, args [][]byte) string {
	switch {
	case errors.Is(err, cluster.ErrNotLeader), errors.Is(err, cluster.ErrNoLeader):
		return r.redirect(cmd, args)
	case errors.Is(err, cluster.ErrUnknownOutcome):
		return "ERR the outcome is unknown: the change may or may not have applied (" + err.Error() + ")"
	}
	return errorReply(err)
}
