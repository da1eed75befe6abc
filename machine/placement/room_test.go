package placement

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/machine/room/roomtest"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// fakeMachine is the room's machine and its apply, over a keyspace of its
// own, checking the contract the core relies on: every slot locked is
// unlocked before a command returns, a deletion or a quota is journaled
// holding its key's slot, and a command answers once.
type fakeMachine struct {
	*roomtest.Locks
	t       *testing.T
	keys    *keyspace.Keyspace
	now     int64
	kinds   map[keyspace.Kind]room.Kind
	room    *Room
	cmds    map[string]room.Command[Exec]
	w       resp.Writer
	err     string
	refusal error
	deleted []string
	quotas  []string
}

func newFakeMachine(t *testing.T) *fakeMachine {
	keys := keyspace.New()
	f := &fakeMachine{Locks: roomtest.NewLocks(t, keys), t: t, keys: keys, now: 1_767_225_600_000_000_000,
		kinds: map[keyspace.Kind]room.Kind{}, cmds: map[string]room.Command[Exec]{}}
	for _, rows := range [][]room.Kind{Kinds(), limiters.Kinds()} {
		for _, k := range rows {
			f.kinds[k.Kind] = k
		}
	}
	f.room = New(f)
	for _, c := range f.room.Commands() {
		f.cmds[c.Name] = c
	}
	return f
}

// do runs one command as the core would (Check, then Run) and returns its
// reply.
func (f *fakeMachine) do(words ...string) string {
	f.t.Helper()
	c, ok := f.cmds[words[0]]
	if !ok {
		f.t.Fatalf("no command %s", words[0])
	}
	args := make([][]byte, len(words))
	for i, w := range words {
		args[i] = []byte(w)
	}
	f.w.Buf, f.err, f.refusal, f.deleted, f.quotas = f.w.Buf[:0], "", nil, nil, nil
	if c.Check != nil {
		if bad := c.Check(args); bad != "" {
			return "-" + bad
		}
	}
	c.Run(f, args)
	if f.Held() != 0 {
		f.t.Fatalf("%v: %d slots still locked", words[0], f.Held())
	}
	if len(f.w.Buf) == 0 || f.err != "" && len(f.w.Buf) != len(f.err)+3 {
		f.t.Fatalf("%v: not one answer: %q", words[0], f.w.Buf)
	}
	return string(f.w.Buf)
}

func (f *fakeMachine) LockKey(key []byte) (*keyspace.Slot, int64) {
	return f.Locks.LockKey(key), f.now
}
func (f *fakeMachine) LockSlot(i int) (*keyspace.Slot, int64) { return f.Locks.LockSlot(i), f.now }
func (f *fakeMachine) Reply() *resp.Writer                    { return &f.w }
func (f *fakeMachine) Error(err error)                        { f.Fail(room.ErrorReply(err)) }
func (f *fakeMachine) Fail(msg string) {
	f.err = msg
	f.w.Error(msg)
}
func (f *fakeMachine) Refuse(why error, msg string) {
	f.refusal = why
	f.Fail(msg)
}
func (f *fakeMachine) Failed() bool { return f.err != "" }
func (f *fakeMachine) Deleted(key []byte) {
	if !f.Holds(key) {
		f.t.Errorf("deletion of %q journaled without its slot's lock", key)
	}
	f.deleted = append(f.deleted, string(key))
}
func (f *fakeMachine) QuotaChanged(key []byte, _ *quota.State) {
	if !f.Holds(key) {
		f.t.Errorf("quota %q journaled without its slot's lock", key)
	}
	f.quotas = append(f.quotas, string(key))
}

func (f *fakeMachine) Store() *keyspace.Keyspace { return f.keys }
func (f *fakeMachine) Applied() int64            { return f.now }
func (f *fakeMachine) AppendState(dst []byte, s *keyspace.Slot, e keyspace.Entry) ([]byte, error) {
	k := f.kinds[e.Kind()]
	switch {
	case !e.Inline():
		out, ok := k.Encode(dst, s.Object(e))
		if !ok {
			return dst, errors.New("not its kind's state")
		}
		return out, nil
	case k.ToBinary != nil:
		return k.ToBinary(dst, s.State(e))
	}
	return append(dst, s.State(e)...), nil
}
func (f *fakeMachine) DecodeState(kind keyspace.Kind, b []byte) (any, error) {
	return f.kinds[kind].Decode(b, quota.LoadZone)
}
func (f *fakeMachine) StoreState(s *keyspace.Slot, key []byte, kind keyspace.Kind, word int64, obj any) error {
	k := f.kinds[kind]
	if !k.Inline {
		_, err := s.Insert(key, kind, word, obj)
		return err
	}
	state, err := k.ToRecord(nil, obj)
	if err != nil {
		return err
	}
	_, err = s.InsertState(key, kind, word, state)
	return err
}
func (f *fakeMachine) KindName(kind keyspace.Kind) string { return f.kinds[kind].Name }
func (f *fakeMachine) Journaled(kind keyspace.Kind) bool  { return f.kinds[kind].Journaled }

// keyIn is a key of slot range [from, to] (the i-th found).
func keyIn(from, to, i int) string {
	for n := 0; ; n++ {
		k := "k" + strconv.Itoa(n)
		if s := slot.Of([]byte(k)); s >= from && s <= to {
			if i == 0 {
				return k
			}
			i--
		}
	}
}

// A chunk of slots moves from one group's room to another's through the
// room alone: the cut stops the source owning it, the import gives the
// target its records and ownership (a quota journaled), a repeat is a
// no-op, an import the target has passed is refused typed, and the moved
// records go from the source with the journaled kinds' deletions.
func TestAChunkMovesThroughTheRoom(t *testing.T) {
	src, dst := newFakeMachine(t), newFakeMachine(t)
	const ok = "+OK\r\n"
	for _, c := range []struct {
		m    *fakeMachine
		args []string
	}{
		{src, []string{"sluice.own", "1", "0-16383"}},
		{dst, []string{"sluice.own", "1", "16000-16383"}},
		{src, []string{"sluice.job", "ADD", "j1", "g2", "a", "b", "0-99"}},
	} {
		if got := c.m.do(c.args...); got != ok {
			t.Fatalf("%v: %q", c.args, got)
		}
	}
	// Records in the chunk (two GCRA keys, a quota) and one outside it.
	sch, err := quota.NewScheduleIn(quota.Day, 0, false, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	qst, _, _, err := quota.Check(quota.State{}, false, src.now, 10, sch, 3)
	if err != nil {
		t.Fatal(err)
	}
	in1, in2, q, out := keyIn(0, 99, 0), keyIn(0, 99, 1), keyIn(0, 99, 2), keyIn(200, 16000, 0)
	for _, k := range []string{in1, in2, out} {
		s := src.keys.LockKey([]byte(k))
		if _, err := s.Insert([]byte(k), keyspace.KindGCRA, src.now+int64(len(k))*1e9, nil); err != nil {
			t.Fatal(err)
		}
		s.Unlock()
	}
	s := src.keys.LockKey([]byte(q))
	if err := src.StoreState(s, []byte(q), keyspace.KindQuota, src.now+86400e9, &qst); err != nil {
		t.Fatal(err)
	}
	s.Unlock()

	if got := src.do("sluice.cut", "j1", "2", "0-99"); got != ok || src.room.Owned().Owns(5) || !src.room.Owned().Owns(100) {
		t.Fatalf("cut: %q, owns 5 %v", got, src.room.Owned().Owns(5))
	}
	exp, err := src.room.ExportSlots([][2]int{{0, 99}})
	if err != nil || exp.Keys != 3 {
		t.Fatalf("export: %d keys, %v", exp.Keys, err)
	}
	imp := []string{"sluice.import", "2", exp.Digest, string(exp.Payload), "0-99"}
	if got := dst.do(imp...); got != ok || !dst.room.Owned().Owns(5) || dst.room.Owned().Epoch != 2 {
		t.Fatalf("import: %q", got)
	}
	if fmt.Sprint(dst.quotas) != fmt.Sprint([]string{q}) {
		t.Errorf("quotas journaled by the import: %v, want [%s]", dst.quotas, q)
	}
	if back, err := dst.room.ExportSlots([][2]int{{0, 99}}); err != nil || back.Digest != exp.Digest {
		t.Fatalf("the target holds other records: %v %s vs %s", err, back.Digest, exp.Digest)
	}
	if got := dst.do(imp...); got != ok {
		t.Fatalf("a repeat: %q", got)
	}
	if got := dst.do("sluice.own", "3", "0-99", "16000-16383"); got != ok {
		t.Fatal(got)
	}
	exp2, _ := src.room.ExportSlots([][2]int{{200, 299}})
	got := dst.do("sluice.import", "2", exp2.Digest, string(exp2.Payload), "200-299")
	var stale *StaleEpochError
	if !errors.As(dst.refusal, &stale) || stale.Epoch != 3 || got != "-"+stale.Reply+"\r\n" {
		t.Fatalf("a stale import: %q, refusal %v", got, dst.refusal)
	}
	if got := src.do("sluice.moved", "j1", "3", strconv.Itoa(len(exp.Payload))); got != ok {
		t.Fatal(got)
	}
	if fmt.Sprint(src.deleted) != fmt.Sprint([]string{q}) {
		t.Errorf("deletions journaled by the move: %v, want only the quota's [%s]", src.deleted, q)
	}
	if left, _ := src.room.ExportSlots([][2]int{{0, 99}}); left.Keys != 0 {
		t.Errorf("%d records left in the moved chunk", left.Keys)
	}
	if j := src.room.Owned().Jobs[0]; j.State != JobSuccess || j.Keys != 3 {
		t.Errorf("the job: %+v", j)
	}
	if n, _ := src.room.ExportSlots([][2]int{{200, 16000}}); n.Keys != 1 {
		t.Errorf("records outside the chunk: %d, want 1", n.Keys)
	}
}
