package slotmove

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/member"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/shardmap"
	"github.com/sluice-rl/sluice/slot"
)

const twoGroups = `epoch: 1
groups:
  - id: g1
    slots: ["0-8191"]
    members: {a1: "127.0.0.1:7001@127.0.0.1:17001"}
  - id: g2
    slots: ["8192-16383"]
    members: {b1: "127.0.0.1:7004@127.0.0.1:17004"}
`

func newDriver(t *testing.T, m *machine.Machine, cfg Config) *Driver {
	t.Helper()
	mp, err := shardmap.Parse([]byte(twoGroups))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := shardmap.NewRouter(mp, "g1")
	cfg.Router, cfg.Machine = r, m
	cfg.Serving = func() bool { return false }
	cfg.Apply = func([][]byte) error { return nil }
	cfg.PlaceGroup = func(context.Context, int, *machine.PlacementRequest) (machine.PlacementResult, error) {
		return machine.PlacementResult{}, nil
	}
	cfg.ReportOf = func(context.Context, int) (member.Report, error) { return member.Report{}, member.ErrUnreachable }
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// A chunk is whole slots from the first remaining one: at most ChunkSlots,
// and no slot more once ChunkKeys counters are in it — but always one.
func TestChunks(t *testing.T) {
	m := machine.New(machine.Options{})
	apply := func(args ...string) {
		var b [][]byte
		for _, a := range args {
			b = append(b, []byte(a))
		}
		m.ApplyArgs(1_800_000_000_000_000_000, b, &resp.Writer{})
	}
	// Slot 3 holds 5 counters, slot 4 holds 3.
	for s, n := range map[int]int{3: 5, 4: 3} {
		tag := slot.Tag(s)
		for i := range n {
			apply("CL.THROTTLE", "{"+string(tag[:])+"}"+strconv.Itoa(i), "5", "1", "86400")
		}
	}
	d := newDriver(t, m, Config{ChunkSlots: 4, ChunkKeys: 6})
	for _, tc := range []struct {
		remaining [][2]int
		want      [2]int
	}{
		{[][2]int{{0, 100}}, [2]int{0, 3}},       // four slots, five counters
		{[][2]int{{4, 100}}, [2]int{4, 7}},       // three counters, four slots
		{[][2]int{{3, 100}}, [2]int{3, 3}},       // five, and slot 4's three would pass six
		{[][2]int{{5, 6}, {9, 9}}, [2]int{5, 6}}, // within the first range
	} {
		got := d.chunk(tc.remaining)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("chunk of %v: %v, want %v", tc.remaining, got, tc.want)
		}
	}
	if err := d.HoldAfter("export"); err == nil {
		t.Fatal("a hold after no step")
	}
	if err := d.Migrate([]Spec{{Ranges: [][2]int{{0, 9}}, Node: "b1"}}); err != ErrNotLeader {
		t.Fatalf("Migrate on a follower: %v", err)
	}
}

// A new job cuts nothing until Settle has passed since the driver first saw
// it (every member learns of it first); a job's end carries the instant
// until which it is still shown, Settle after the end.
func TestSettleAndShowUntil(t *testing.T) {
	m := machine.New(machine.Options{})
	for _, c := range [][]string{{"SLUICE.OWN", "1", "0-8191"}, {"SLUICE.JOB", "ADD", "j1", "g2", "a1", "b1", "0-9"}} {
		var b [][]byte
		for _, a := range c {
			b = append(b, []byte(a))
		}
		m.ApplyArgs(1_800_000_000_000_000_000, b, &resp.Writer{})
	}
	now := time.UnixMilli(1_800_000_000_000)
	var applied [][]string
	d := newDriver(t, m, Config{Settle: time.Second, Now: func() time.Time { return now }})
	d.cfg.Apply = func(args [][]byte) error {
		var words []string
		for _, a := range args {
			words = append(words, string(a))
		}
		applied = append(applied, words)
		return nil
	}
	for _, step := range []time.Duration{0, 999 * time.Millisecond} {
		now = now.Add(step)
		if d.step() || len(applied) != 0 {
			t.Fatalf("cut %v after the job was first seen: %v", step, applied)
		}
	}
	now = now.Add(time.Millisecond)
	if !d.step() || len(applied) != 1 || applied[0][0] != "SLUICE.CUT" {
		t.Fatalf("no cut once settled: %v", applied)
	}
	j := m.Owned().Jobs[0]
	if err := d.end(&j, machine.JobFailed, "why"); err != nil {
		t.Fatal(err)
	}
	want := []string{"SLUICE.JOB", "END", "j1", "failed", strconv.FormatInt(now.Add(time.Second).UnixMilli(), 10), "why"}
	if got := applied[1]; !reflect.DeepEqual(got, want) {
		t.Fatalf("end: %v, want %v", got, want)
	}
}

// A group id that is not one word is refused before anything is logged,
// in words of the driver's own (once, not "ERR ERR").
func TestAddGroupRefusesABadID(t *testing.T) {
	d := newDriver(t, machine.New(machine.Options{}), Config{})
	for _, id := range []string{"", "a b"} {
		err := d.AddGroup(context.Background(), id, []cluster.Peer{{ID: "n", ClientAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2"}})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "a group id is one word") || strings.Contains(err.Error(), "ERR") {
			t.Fatalf("AddGroup(%q): %v", id, err)
		}
	}
}

// A target past the chunk's epoch refuses the import typed, with its
// epoch; the source cuts the chunk again above it — the text of the
// refusal is never read.
func TestStaleImportIsCutAgainAboveTheTargetsEpoch(t *testing.T) {
	m := machine.New(machine.Options{})
	for _, c := range [][]string{{"SLUICE.OWN", "1", "0-8191"}, {"SLUICE.JOB", "ADD", "j1", "g2", "a1", "b1", "0-9"},
		{"SLUICE.CUT", "j1", "2", "0-9"}} {
		var b [][]byte
		for _, a := range c {
			b = append(b, []byte(a))
		}
		m.ApplyArgs(1_800_000_000_000_000_000, b, &resp.Writer{})
	}
	var applied [][]string
	d := newDriver(t, m, Config{})
	d.cfg.Apply = func(args [][]byte) error {
		var words []string
		for _, a := range args {
			words = append(words, string(a))
		}
		applied = append(applied, words)
		return nil
	}
	d.cfg.PlaceGroup = func(context.Context, int, *machine.PlacementRequest) (machine.PlacementResult, error) {
		return machine.PlacementResult{}, &machine.StaleEpochError{Epoch: 9, Reply: "a refusal whose words say nothing"}
	}
	j := m.Owned().Jobs[0]
	if len(j.Pending) == 0 {
		t.Fatalf("no chunk pending: %+v", j)
	}
	if err := d.finish(&j); err != nil {
		t.Fatal(err)
	}
	want := []string{"SLUICE.CUT", "j1", "10", "0-9"}
	if len(applied) != 1 || !reflect.DeepEqual(applied[0], want) {
		t.Fatalf("after a stale import: %v, want %v", applied, want)
	}
}

// A command the log answered with an error is an error of the step that
// logged it, typed as the apply made it.
func TestApplyErrorIsTyped(t *testing.T) {
	d := newDriver(t, machine.New(machine.Options{}), Config{})
	d.cfg.Apply = func([][]byte) error {
		return &machine.ReplyError{Reason: machine.ReasonInvalid, Reply: "ERR no such job"}
	}
	var re *machine.ReplyError
	if err := d.apply("SLUICE.JOB", "CANCEL"); !errors.As(err, &re) || re.Reason != machine.ReasonInvalid || !strings.HasPrefix(err.Error(), "SLUICE.JOB: ") {
		t.Fatalf("an error answer: %v", err)
	}
}

// A target whose rules agree but whose configuration does not (an
// override it missed) is given this group's; one of 0.4.0, which says
// only its rules' digest, is compared by its rules.
func TestTargetWithAnotherConfigurationIsGivenThisGroups(t *testing.T) {
	m := machine.New(machine.Options{})
	for _, c := range [][]string{{"RL.RULES", "LOAD", "x.yaml", "domain: x\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 10}\n"},
		{"RL.OVERRIDE", "SET", "x", "50", "day", "DESCRIPTOR", "user", "vip"}} {
		var b [][]byte
		for _, a := range c {
			b = append(b, []byte(a))
		}
		var w resp.Writer
		m.ApplyArgs(1_800_000_000_000_000_000, b, &w)
		if w.Buf[0] == '-' {
			t.Fatalf("%s: %s", c[0], w.Buf)
		}
	}
	mine, err := m.ConfigDigest()
	if err != nil {
		t.Fatal(err)
	}
	rules := m.RulesDigest("")
	for _, tc := range []struct {
		theirs machine.PlacementResult
		copied bool
	}{
		{machine.PlacementResult{Digest: rules, Config: "another"}, true},
		{machine.PlacementResult{Digest: rules, Config: mine}, false},
		{machine.PlacementResult{Digest: rules}, false},        // 0.4.0, same rules
		{machine.PlacementResult{Digest: "other rules"}, true}, // 0.4.0, other rules
	} {
		d := newDriver(t, m, Config{})
		theirs, copied := tc.theirs, false
		d.cfg.PlaceGroup = func(_ context.Context, _ int, req *machine.PlacementRequest) (machine.PlacementResult, error) {
			switch req.Kind {
			case machine.PlaceConfig:
				if req.Digest != mine {
					t.Fatalf("copied %s, not this group's configuration %s", req.Digest, mine)
				}
				copied, theirs = true, machine.PlacementResult{Digest: rules, Config: mine}
			case machine.PlaceDigest:
				return theirs, nil
			}
			return machine.PlacementResult{}, nil
		}
		if err := d.sameConfig(1); err != nil || copied != tc.copied {
			t.Fatalf("theirs %+v: copied %v, err %v", tc.theirs, copied, err)
		}
	}
}
