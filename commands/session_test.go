package commands

import (
	"errors"
	"testing"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/resp"
)

// groupApplier is a Batcher applying each group on m at once, counting
// the groups.
type groupApplier struct {
	m      *machine.Machine
	groups *int
}

func (groupApplier) Apply(int64, *machine.Command, [][]byte, *resp.Writer) machine.Outcome {
	panic("groupApplier: Apply")
}
func (groupApplier) Redirect(*machine.Command, [][]byte) *machine.Redirect { return nil }
func (groupApplier) RedirectKey([]byte) *machine.Redirect                  { return nil }
func (groupApplier) ErrorReply(err error, _ []byte) error                  { return errors.New("ERR " + err.Error()) }
func (g groupApplier) ApplyAll(cmds [][][]byte) (func(int) ([]byte, machine.Outcome), error) {
	*g.groups++
	replies := make([][]byte, len(cmds))
	outs := make([]machine.Outcome, len(cmds))
	for i, c := range cmds {
		var w resp.Writer
		outs[i] = g.m.ApplyArgs(1e18, c, &w)
		replies[i] = w.Buf
	}
	return func(i int) ([]byte, machine.Outcome) { return replies[i], outs[i] }, nil
}

// DecideAll runs a batch as a pipeline: the commands the log takes go in
// one group, each outcome comes back in its command's place, a command
// refused before it applied (malformed, unknown) in its own.
func TestSessionDecideAllIsOneGroup(t *testing.T) {
	env := testEnv()
	groups := 0
	env.Applier = groupApplier{m: env.Machine, groups: &groups}
	rules := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
	var w resp.Writer
	if out := env.Machine.ApplyArgs(1e18, [][]byte{[]byte("RL.RULES"), []byte("LOAD"), []byte("d.yaml"), []byte(rules)}, &w); out.Err != "" {
		t.Fatal(out.Err)
	}
	call := func(v string) [][]byte {
		return [][]byte{[]byte("RL.SHOULDRATELIMIT"), []byte("d"), []byte("1"), []byte("1"), []byte("-"), []byte("-"), []byte("-"), []byte("k"), []byte(v)}
	}
	s := env.NewSession("member")
	outs, err := s.DecideAll([][][]byte{call("a"), {[]byte("RL.SHOULDRATELIMIT"), []byte("d")}, call("a"), {[]byte("NOPE")}, call("a"), call("b")})
	if err != nil {
		t.Fatal(err)
	}
	if groups != 1 || len(outs) != 6 {
		t.Fatalf("%d groups, %d outcomes", groups, len(outs))
	}
	for i, want := range []struct {
		limited bool
		err     bool
		left    int64
	}{{false, false, 1}, {false, true, 0}, {false, false, 0}, {false, true, 0}, {true, false, 0}, {false, false, 1}} {
		o := outs[i]
		if (o.Err != "") != want.err || o.Limited != want.limited || !want.err && (len(o.Statuses) != 1 || o.Statuses[0].Remaining != want.left) {
			t.Fatalf("outcome %d: %+v, want %+v", i, o, want)
		}
	}
}
