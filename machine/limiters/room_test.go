package limiters

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/machine/room/roomtest"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/resp"
)

// fakeExec is an apply as the room sees it, over a keyspace of its own: it
// checks the contract the core relies on — every slot locked is unlocked
// before the command returns, a quota change is journaled holding its
// key's slot, and a command answers exactly once.
type fakeExec struct {
	*roomtest.Locks
	t       *testing.T
	now     int64
	w       resp.Writer
	answers int
	err     string
	reason  room.Reason
	journal []string
	scratch Scratch
}

func (f *fakeExec) LockKey(key []byte) (*keyspace.Slot, int64) {
	return f.Locks.LockKey(key), f.now
}

func (f *fakeExec) Reply() *resp.Writer { return &f.w }

func (f *fakeExec) At(uint32) bool { return true }

func (f *fakeExec) Limiter(res limiter.Result) { f.LimiterReply(res.Limited, res.Reply()) }

func (f *fakeExec) LimiterReply(_ bool, reply [5]int64) {
	f.answers++
	f.w.Limiter(reply)
}

// Error types an error as the core's apply does: WRONGTYPE for a key of
// another kind, else a command that was wrong.
func (f *fakeExec) Error(err error) {
	if errors.Is(err, keyspace.ErrWrongType) {
		f.FailFor(room.ReasonWrongType, room.ErrorReply(err))
		return
	}
	f.Fail(room.ErrorReply(err))
}
func (f *fakeExec) Fail(msg string) { f.FailFor(room.ReasonInvalid, msg) }
func (f *fakeExec) FailFor(r room.Reason, msg string) {
	f.answers++
	f.err, f.reason = msg, r
	f.w.Error(msg)
}

func (f *fakeExec) QuotaChanged(key []byte, _ *quota.State) {
	if !f.Holds(key) {
		f.t.Errorf("quota %q journaled without its slot's lock", key)
	}
	f.journal = append(f.journal, string(key))
}

func (f *fakeExec) Scratch() *Scratch { return &f.scratch }

// A room's commands, run with arguments good and bad in any order, keep
// the lock discipline, answer once (a reply that is not an error counts as
// one), and refuse in Run what Check refuses, with the same text.
func TestCommandsKeepTheContract(t *testing.T) {
	r := New()
	cmds := map[string]room.Command[Exec]{}
	for _, c := range r.Commands() {
		if _, dup := cmds[c.Name]; dup || c.Run == nil {
			t.Fatalf("%s: declared twice or without Run", c.Name)
		}
		cmds[c.Name] = c
	}
	calls := [][]string{
		{"cl.throttle", "k", "2", "10", "60"}, {"cl.throttle", "k", "2", "10", "60", "3"}, {"cl.throttle", "k", "x", "10", "60"},
		{"cl.throttle", "k", "-1", "10", "60"}, {"sw.check", "s", "10", "60"}, {"sw.check", "s", "10", "60", "EXACT"},
		{"sw.check", "s", "0", "60"}, {"fw.check", "f", "10", "60"}, {"fw.check", "f", "10", "60", "COST", "3"},
		{"conc.acquire", "c", "2", "30", "r1"}, {"conc.acquire", "c", "2", "30", "r2"}, {"conc.acquire", "c", "2", "0", "r3"},
		{"conc.renew", "c", "r1", "30"}, {"conc.release", "c", "r1"}, {"conc.get", "c"},
		{"quota.check", "q", "10", "DAY"}, {"quota.check", "q", "10", "DAY", "TZ", "Europe/Paris"}, {"quota.check", "q", "10", "FORTNIGHT"},
		{"quota.check", "q", "10", "DAY", "TZ", "Mars/Olympus"}, {"quota.get", "q"}, {"quota.refund", "q", "2"},
		{"quota.refund", "q", "-2"}, {"quota.reset", "q"}, {"quota.get", "none"},
		// another kind's key: WRONGTYPE, the lock released
		{"quota.check", "k", "10", "DAY"}, {"sw.check", "c", "10", "60"}, {"conc.acquire", "q", "2", "30", "r1"},
	}
	f := &fakeExec{Locks: roomtest.NewLocks(t, keyspace.New()), t: t, now: 1_767_225_600_000_000_000}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		call := calls[rng.IntN(len(calls))]
		c, ok := cmds[call[0]]
		if !ok {
			t.Fatalf("no command %s", call[0])
		}
		args := make([][]byte, len(call))
		for i, a := range call {
			args[i] = []byte(a)
		}
		f.now += int64(rng.IntN(5)) * 1e9
		f.w.Buf, f.answers, f.err, f.journal = f.w.Buf[:0], 0, "", f.journal[:0]
		bad := ""
		if c.Check != nil {
			bad = c.Check(args)
		}
		c.Run(f, args)
		reply := string(f.w.Buf)
		what := fmt.Sprintf("round %d %v", round, call)
		if f.Held() != 0 {
			t.Fatalf("%s: %d slots still locked after the command", what, f.Held())
		}
		if reply == "" || f.answers > 1 {
			t.Fatalf("%s: answered %d times: %q", what, f.answers, reply)
		}
		if bad != "" && (f.err != bad || f.reason != room.ReasonInvalid) {
			t.Errorf("%s: Check refuses %q, Run answered %q (%v)", what, bad, f.err, f.reason)
		}
		if strings.HasPrefix(f.err, "WRONGTYPE") && f.reason != room.ReasonWrongType {
			t.Errorf("%s: %q typed %v", what, f.err, f.reason)
		}
		if len(f.journal) > 0 && (f.err != "" || !strings.HasPrefix(call[0], "quota.")) {
			t.Errorf("%s: journaled %v, answered %q", what, f.journal, reply)
		}
	}
}
