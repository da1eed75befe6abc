package machine

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/resp"
)

// moveOnce drives one chunk of job id from src to dst as package slotmove
// does: cut at epoch, export, import, moved. It returns the export.
func moveOnce(t *testing.T, src, dst *Machine, now int64, id string, epoch uint64, chunk string) SlotExport {
	t.Helper()
	if got := do(src, now, "SLUICE.CUT", id, strconv.FormatUint(epoch, 10), chunk); got != "+OK\r\n" {
		t.Fatalf("cut %s: %q", chunk, got)
	}
	from, to, _ := strings.Cut(chunk, "-")
	f, _ := strconv.Atoi(from)
	l, _ := strconv.Atoi(to)
	exp, err := src.ExportSlots([][2]int{{f, l}})
	if err != nil {
		t.Fatal(err)
	}
	if got := do(dst, now, "SLUICE.IMPORT", strconv.FormatUint(epoch, 10), exp.Digest, string(exp.Payload), chunk); got != "+OK\r\n" {
		t.Fatalf("import %s: %q", chunk, got)
	}
	if got := do(src, now, "SLUICE.MOVED", id, strconv.Itoa(exp.Keys), strconv.Itoa(len(exp.Payload))); got != "+OK\r\n" {
		t.Fatalf("moved %s: %q", chunk, got)
	}
	return exp
}

// A chunk moves whole: after its cut the source refuses it and its records
// there stop changing; the target decides for it only after the import,
// with the same records (equal digests), and continues their counts; the
// source then holds none. Imports repeat as no-ops and a stale one is
// refused; the job's progress and end are replicated state.
func TestMoveSlotsBetweenGroups(t *testing.T) {
	src, dst := New(Options{}), New(Options{})
	do(src, t0, "SLUICE.OWN", "1", "0-8191")
	do(dst, t0, "SLUICE.OWN", "1", "8192-16383")
	keys := []string{keyInSlot(10), keyInSlot(11), keyInSlot(11) + "b", keyInSlot(20)}
	for _, k := range keys {
		for range 3 {
			do(src, t0, "CL.THROTTLE", k, "4", "10", "60")
		}
	}
	do(src, t0, "QUOTA.CHECK", keyInSlot(12), "100", "month", "COST", "7")
	do(src, t0, "SW.CHECK", keyInSlot(13), "10", "60")
	before, n, _ := src.DigestSlots(0, 100)
	if n != 6 {
		t.Fatalf("%d counters in slots 0-100, want 6", n)
	}
	if got := do(src, t0, "SLUICE.JOB", "ADD", "j1", "g2", "a", "b", "0-99"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := do(src, t0, "SLUICE.JOB", "ADD", "j2", "g2", "a", "b", "50-60"); !strings.Contains(got, "already migrating") {
		t.Fatalf("overlapping job: %q", got)
	}
	if got := do(src, t0, "SLUICE.CUT", "j1", "2", "0-49"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	// Cut: the source refuses, the target does not own yet.
	for _, m := range []*Machine{src, dst} {
		if got := do(m, t0+1, "CL.THROTTLE", keys[0], "4", "10", "60"); !strings.Contains(got, "TRYAGAIN") {
			t.Fatalf("a cut chunk is decided: %q", got)
		}
	}
	exp, _ := src.ExportSlots([][2]int{{0, 49}})
	if exp.Digest != before || exp.Keys != 6 {
		t.Fatalf("export %s/%d, digest before the cut %s", exp.Digest, exp.Keys, before)
	}
	imp := []string{"SLUICE.IMPORT", "2", exp.Digest, string(exp.Payload), "0-49"}
	bad := append([]string{}, imp...)
	bad[3] = string(exp.Payload[:len(exp.Payload)-1])
	if got := do(dst, t0+1, bad...); !strings.Contains(got, "digest") {
		t.Fatalf("a payload not matching its digest: %q", got)
	}
	for range 2 { // the second is a repeat
		if got := do(dst, t0+1, imp...); got != "+OK\r\n" {
			t.Fatal(got)
		}
	}
	if d, k, _ := dst.DigestSlots(0, 49); d != before || k != 6 {
		t.Fatalf("target digest %s/%d, source's %s", d, k, before)
	}
	// The target continues the counts: the fourth of a burst of 4+1 is
	// allowed, the sixth is not.
	if got := do(dst, t0+1, "CL.THROTTLE", keys[0], "4", "10", "60"); !strings.HasPrefix(got, "*5\r\n:0\r\n:5\r\n:1\r\n") {
		t.Fatalf("the target's 4th call: %s", got)
	}
	if got := do(src, t0+1, "SLUICE.MOVED", "j1", "6", strconv.Itoa(len(exp.Payload))); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if _, k, _ := src.DigestSlots(0, 49); k != 0 {
		t.Fatalf("the source keeps %d counters of a moved chunk", k)
	}
	// The rest of the job, then it succeeds; a stale import is refused.
	moveOnce(t, src, dst, t0+2, "j1", 3, "50-99")
	if got := do(dst, t0+2, imp...); got != "+OK\r\n" {
		t.Fatalf("a repeat of an applied import after a later one: %q", got)
	}
	j := src.Owned().Jobs[0]
	if j.State != JobSuccess || j.Keys != 6 || len(j.Remaining()) != 0 || j.Ended == 0 {
		t.Fatalf("job %+v", j)
	}
	if o := dst.Owned(); o.Epoch != 3 || !o.Owns(0) || !o.Owns(99) || o.Owns(100) {
		t.Fatalf("target ownership %+v", o.Ranges)
	}
	// Back to the source: the old import of 0-49 at epoch 2 can never
	// bring the chunk back to dst.
	do(dst, t0+3, "SLUICE.JOB", "ADD", "j3", "g1", "b", "a", "0-49")
	moveOnce(t, dst, src, t0+3, "j3", 4, "0-49")
	// The refusal is typed: the source reads the target's epoch from it,
	// never from the text.
	var w resp.Writer
	args := make([][]byte, len(imp))
	for i, a := range imp {
		args[i] = []byte(a)
	}
	out := dst.ApplyArgs(t0+3, args, &w)
	var stale *StaleEpochError
	if !errors.As(out.Refusal, &stale) || stale.Epoch != 4 || !errors.Is(out.Refusal, ErrStaleEpoch) ||
		!strings.HasPrefix(string(w.Buf), "-STALEEPOCH 4 ") || out.Err != stale.Reply {
		t.Fatalf("a stale import after the chunk moved on: %q %+v", w.Buf, out)
	}
	if d, _, _ := src.DigestSlots(0, 49); d == before {
		t.Fatal("the source's digest should include the target's later decision")
	}
}

// A cancelled job cuts nothing more; a chunk in flight completes first.
func TestCancelSlotMigration(t *testing.T) {
	src, dst := New(Options{}), New(Options{})
	do(src, t0, "SLUICE.OWN", "1", "0-8191")
	do(dst, t0, "SLUICE.OWN", "1", "8192-16383")
	do(src, t0, "SLUICE.JOB", "ADD", "j1", "g2", "a", "b", "0-99")
	do(src, t0, "SLUICE.CUT", "j1", "2", "0-9")
	do(src, t0, "SLUICE.JOB", "CANCEL")
	if got := src.Owned().Jobs[0]; got.State != JobRunning || !got.Cancel {
		t.Fatalf("a job with a chunk in flight ends only after it: %+v", got)
	}
	if got := do(src, t0, "SLUICE.CUT", "j1", "3", "10-19"); !strings.Contains(got, "in flight") {
		t.Fatalf("%q", got)
	}
	exp, _ := src.ExportSlots([][2]int{{0, 9}})
	do(dst, t0, "SLUICE.IMPORT", "2", exp.Digest, string(exp.Payload), "0-9")
	do(src, t0, "SLUICE.MOVED", "j1", "0", "0")
	j := src.Owned().Jobs[0]
	if j.State != JobCancelled || len(j.Done) != 1 || j.Done[0] != [2]int{0, 9} {
		t.Fatalf("%+v", j)
	}
	if got := do(src, t0, "SLUICE.CUT", "j1", "3", "10-19"); !strings.Contains(got, "cancelled") {
		t.Fatalf("cut of a cancelled job: %q", got)
	}
	if !src.Owned().Owns(10) || src.Owned().Owns(5) {
		t.Fatal("ownership after the cancel")
	}
}

// The groups added to and removed from a running cluster: an add again is a
// no-op, other members for the same id are refused, a removal is final (the
// id is not used again), a map file's group can be removed; the list
// survives FLUSHALL.
func TestGroupList(t *testing.T) {
	m := New(Options{})
	add := []string{"SLUICE.GROUPS", "ADD", "g3", "c1=127.0.0.1:7007@127.0.0.1:17007", "c2=127.0.0.1:7008@127.0.0.1:17008"}
	for range 2 {
		if got := do(m, t0, add...); got != "+OK\r\n" {
			t.Fatal(got)
		}
	}
	if got := do(m, t0, "SLUICE.GROUPS", "ADD", "g3", "c1=127.0.0.1:9@127.0.0.1:10"); !strings.Contains(got, "other members") {
		t.Fatalf("%q", got)
	}
	if got := do(m, t0, "SLUICE.GROUPS", "ADD", "g4", "c1"); !strings.Contains(got, "<member-id>=") {
		t.Fatalf("%q", got)
	}
	do(m, t0, "FLUSHALL")
	do(m, t0, "SLUICE.GROUPS", "DEL", "g1")
	do(m, t0, "SLUICE.GROUPS", "DEL", "g3")
	if got := do(m, t0, add...); !strings.Contains(got, "not used again") {
		t.Fatalf("%q", got)
	}
	l := m.Groups()
	if len(l.Groups) != 2 || l.Groups[0].ID != "g3" || !l.Groups[0].Removed || len(l.Groups[0].Members) != 2 || l.Groups[1].ID != "g1" || !l.Groups[1].Removed {
		t.Fatalf("%+v", l)
	}
}

// The command that ends a job carries the instant until which its slots are
// still shown as the source's (SLUICE.MOVED of the last chunk, JOB END, JOB
// CANCEL); a bad instant is refused before the log; jobs written before
// the instant existed still decode.
func TestJobShowUntil(t *testing.T) {
	src, dst := New(Options{}), New(Options{})
	do(src, t0, "SLUICE.OWN", "1", "0-8191")
	do(dst, t0, "SLUICE.OWN", "1", "8192-16383")
	do(src, t0, "SLUICE.JOB", "ADD", "j1", "g2", "a", "b", "0-9")
	do(src, t0, "SLUICE.CUT", "j1", "2", "0-9")
	exp, _ := src.ExportSlots([][2]int{{0, 9}})
	do(dst, t0, "SLUICE.IMPORT", "2", exp.Digest, string(exp.Payload), "0-9")
	if got := do(src, t0, "SLUICE.MOVED", "j1", "0", "0", "1700000001000"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	do(src, t0, "SLUICE.JOB", "ADD", "j2", "g2", "a", "b", "10-19")
	do(src, t0, "SLUICE.JOB", "END", "j2", "failed", "1700000002000", "the target went away")
	do(src, t0, "SLUICE.JOB", "ADD", "j3", "g2", "a", "b", "20-29")
	do(src, t0, "SLUICE.JOB", "END", "j3", "failed", "no target")
	do(src, t0, "SLUICE.JOB", "ADD", "j4", "g2", "a", "b", "30-39")
	do(src, t0, "SLUICE.JOB", "CANCEL", "1700000004000")
	want := []struct {
		state string
		until int64
		msg   string
	}{{JobSuccess, 1700000001000, ""}, {JobFailed, 1700000002000, "the target went away"}, {JobFailed, 0, "no target"},
		{JobCancelled, 1700000004000, ""}}
	for i, j := range src.Owned().Jobs {
		if j.State != want[i].state || j.ShowUntil != want[i].until || j.Message != want[i].msg {
			t.Fatalf("job %s: %s until %d %q, want %+v", j.ID, j.State, j.ShowUntil, j.Message, want[i])
		}
	}
	for _, bad := range [][]string{{"SLUICE.MOVED", "j1", "0", "0", "-5"}, {"SLUICE.MOVED", "j1", "0", "0", "1", "2"},
		{"SLUICE.JOB", "CANCEL", "soon"}, {"SLUICE.JOB", "END", "j1", "failed", "soon", "why"}} {
		args := make([][]byte, len(bad))
		for i, a := range bad {
			args[i] = []byte(a)
		}
		if got := src.Check(args); !strings.HasPrefix(got, "ERR") {
			t.Fatalf("%v is let into the log: %q", bad, got)
		}
	}
	// Round trip, and the first encoding (no version, no instant).
	o := src.Owned()
	back, err := decodeOwnership(o.AppendBinary(nil))
	if err != nil || len(back.Jobs) != 4 || back.Jobs[1].ShowUntil != 1700000002000 {
		t.Fatalf("round trip: %v %+v", err, back)
	}
	old := binary.AppendUvarint(nil, o.Epoch)
	old = binary.AppendUvarint(old, uint64(len(o.Ranges)))
	for _, r := range o.Ranges {
		old = binary.AppendUvarint(old, uint64(r[0]))
		old = binary.AppendUvarint(old, uint64(r[1]))
	}
	v1 := (&Ownership{Epoch: o.Epoch, Ranges: o.Ranges, Jobs: o.Jobs[:1]}).AppendBinary(nil)[len(old):]
	old = append(old, v1[2:]...)                                            // no version marker
	old = old[:len(old)-len(binary.AppendVarint(nil, o.Jobs[0].ShowUntil))] // no instant
	back, err = decodeOwnership(old)
	if err != nil || len(back.Jobs) != 1 || back.Jobs[0].State != JobSuccess || back.Jobs[0].ShowUntil != 0 {
		t.Fatalf("first encoding: %v %+v", err, back)
	}
}

// An import replaces whatever the target still held in the slots it takes
// (records of an earlier stay, or from before it fenced by a map): after
// it the target's slots hold exactly the export. An import the target's
// epoch has passed is a repeat only if the target owns all of its slots;
// owning some of them is not enough.
func TestImportReplacesLeftoversAndRepeatsOnlyWhole(t *testing.T) {
	src, dst := New(Options{}), New(Options{})
	stale := keyInSlot(10) + "stale"
	do(dst, t0, "CL.THROTTLE", stale, "4", "10", "60") // before dst fenced by a map
	do(src, t0, "SLUICE.OWN", "1", "0-8191")
	do(dst, t0, "SLUICE.OWN", "1", "8192-16383")
	do(src, t0, "CL.THROTTLE", keyInSlot(10), "4", "10", "60")
	do(src, t0, "SLUICE.JOB", "ADD", "j1", "g2", "a", "b", "0-99")
	exp := moveOnce(t, src, dst, t0+1, "j1", 2, "0-49")
	if d, k, _ := dst.DigestSlots(0, 49); d != exp.Digest || k != exp.Keys {
		t.Fatalf("after the import the target's slots hold %d records (digest %s), the export %d (%s): leftovers stayed", k, d, exp.Keys, exp.Digest)
	}
	// dst owns 0-49 at epoch 2; an epoch-2 import of 0-99 is stale, not a
	// repeat (it owns only half of it).
	wide, err := src.ExportSlots([][2]int{{0, 99}})
	if err != nil {
		t.Fatal(err)
	}
	if got := do(dst, t0+2, "SLUICE.IMPORT", "2", wide.Digest, string(wide.Payload), "0-99"); !strings.HasPrefix(got, "-STALEEPOCH ") {
		t.Fatalf("an import of slots the target owns only some of, at an epoch it passed: %q", got)
	}
}
