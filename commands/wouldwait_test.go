package commands

import (
	"errors"
	"testing"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/resp"
)

// queueOnly is a Batcher that never applies: it lets a test see what
// queues for Settle and what would wait.
type queueOnly struct{}

func (queueOnly) Apply(int64, *machine.Command, [][]byte, *resp.Writer) machine.Outcome {
	panic("queueOnly: Apply")
}
func (queueOnly) Redirect(*machine.Command, [][]byte) *machine.Redirect { return nil }
func (queueOnly) RedirectKey([]byte) *machine.Redirect                  { return nil }
func (queueOnly) ErrorReply(error, []byte) error                        { return errors.New("") }
func (queueOnly) ApplyAll([][][]byte) (func(int) ([]byte, machine.Outcome), error) {
	panic("queueOnly: ApplyAll")
}

// WouldWait tells the event loop which commands may block: on one node
// only those that wait by nature; on a replicated node also EXEC and a
// surface command behind queued machine commands, never a machine command
// (it queues) or a command queued inside MULTI.
func TestWouldWait(t *testing.T) {
	argv := func(args ...string) [][]byte {
		a := make([][]byte, len(args))
		for i, s := range args {
			a[i] = []byte(s)
		}
		return a
	}
	wouldWait := func(c *Ctx, args ...string) bool {
		return c.WouldWait(c.Env.Table.Lookup([]byte(args[0])))
	}
	dispatch := func(c *Ctx, args ...string) {
		c.Reset()
		c.Env.Table.Dispatch(c, argv(args...))
	}

	single := testCtx(fuzzEnv())
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"PING"}, false},
		{[]string{"CL.THROTTLE", "k", "1", "1", "1"}, false},
		{[]string{"EXEC"}, false},
		{[]string{"NOSUCHCOMMAND"}, false},
		{[]string{"save"}, true},
		{[]string{"RAFT", "STATUS"}, true},
		{[]string{"DEBUG", "SLEEP", "1"}, true},
	} {
		if got := wouldWait(single, tc.args...); got != tc.want {
			t.Errorf("one node: WouldWait(%v) = %v, want %v", tc.args, got, tc.want)
		}
	}

	env := fuzzEnv()
	env.Applier = queueOnly{}
	c := testCtx(env)
	if wouldWait(c, "PING") || wouldWait(c, "CL.THROTTLE", "k", "1", "1", "1") {
		t.Fatal("replicated, nothing queued: PING or CL.THROTTLE would wait")
	}
	if !wouldWait(c, "EXEC") || !wouldWait(c, "SAVE") {
		t.Fatal("replicated: EXEC or SAVE would not wait")
	}
	dispatch(c, "CL.THROTTLE", "k", "1", "1", "1")
	if !c.Unsettled() {
		t.Fatal("a machine command on a replicated node did not queue")
	}
	if !wouldWait(c, "PING") {
		t.Fatal("PING behind a queued machine command would not wait (Dispatch settles first)")
	}
	if wouldWait(c, "CL.THROTTLE", "k2", "1", "1", "1") {
		t.Fatal("a second machine command would wait instead of queueing")
	}

	tx := testCtx(env)
	dispatch(tx, "MULTI")
	if wouldWait(tx, "PING") || wouldWait(tx, "CL.THROTTLE", "k", "1", "1", "1") {
		t.Fatal("inside MULTI a command queues; it would wait")
	}
	if !wouldWait(tx, "EXEC") {
		t.Fatal("EXEC of a replicated transaction would not wait")
	}
}
