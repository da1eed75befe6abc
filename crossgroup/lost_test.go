package crossgroup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/member"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/shardmap"
)

const twoGroups = `epoch: 1
groups:
  - id: g1
    slots: ["0-8191"]
    members: {a1: "127.0.0.1:7001@127.0.0.1:17001"}
  - id: g2
    slots: ["8192-16383"]
    members: {b1: "127.0.0.1:7002@127.0.0.1:17002"}
`

const lostRules = `domain: x
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: day, requests_per_unit: 10, sluice: {algorithm: gcra, burst: 9}}
`

// fakeMembers are two groups' leaders in process, each a state machine,
// with the faults a test sets: a group whose part's answer is lost after
// it applied, or before (held back, applied when released), and cancels
// that cannot be delivered for a while.
type fakeMembers struct {
	mu       sync.Mutex
	now      int64
	machines map[string]*machine.Machine
	// lose: the group whose RL.PART RESERVE applies, its answer lost.
	lose string
	// hold: the group whose RL.PART RESERVE is held back, answer lost.
	hold string
	held [][]byte
	// cancelFails: cancels that cannot be delivered before one is.
	cancelFails int
	// settleRefused: the group whose next RL.PART SETTLE is refused,
	// nothing applied.
	settleRefused string
	// afterLose runs once the lost part applied (a slot moving then).
	afterLose func()
	// cancels are the cancels delivered: to which group, for which slots.
	cancels []sentCancel
	// reserveTTLs are the ttls the parts sent asked to be held for.
	reserveTTLs []int64
}

type sentCancel struct {
	group string
	slots []int
}

func (f *fakeMembers) Place(context.Context, member.Addr, *machine.PlacementRequest) (machine.PlacementResult, error) {
	return machine.PlacementResult{}, member.ErrRefused // a check's parts go as Part
}

func (f *fakeMembers) Part(_ context.Context, to member.Addr, req *machine.PartRequest) (machine.PartResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.machines[to.Group]
	cmd, err := req.Command()
	if err != nil {
		return machine.PartResult{}, err
	}
	switch {
	case req.Kind == machine.PartReserve && to.Group == f.hold:
		f.held = cmd
		return machine.PartResult{}, fmt.Errorf("%w: the deadline passed", member.ErrUnknownOutcome)
	case req.Kind == machine.PartCancel && f.cancelFails > 0:
		f.cancelFails--
		return machine.PartResult{}, fmt.Errorf("%w: a partition", member.ErrUnreachable)
	case req.Kind == machine.PartSettle && to.Group == f.settleRefused:
		f.settleRefused = ""
		return machine.PartResult{}, &machine.PartError{Reply: "TRYAGAIN not now"}
	}
	switch req.Kind {
	case machine.PartCancel:
		f.cancels = append(f.cancels, sentCancel{group: to.Group, slots: req.Slots})
	case machine.PartReserve:
		f.reserveTTLs = append(f.reserveTTLs, req.TTL)
	}
	var w resp.Writer
	out := m.ApplyArgs(f.now, cmd, &w)
	if req.Kind == machine.PartReserve && to.Group == f.lose {
		if f.afterLose != nil {
			f.afterLose()
		}
		return machine.PartResult{}, fmt.Errorf("%w: the answer was lost", member.ErrUnknownOutcome)
	}
	return machine.PartOf(req.Kind, out)
}

// release applies the held part, late.
func (f *fakeMembers) release() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var w resp.Writer
	f.machines[f.hold].ApplyArgs(f.now, f.held, &w)
	return string(w.Buf)
}

// remaining is what is left of user u's limit in the group that holds it.
func (f *fakeMembers) remaining(t *testing.T, u string) int64 {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var left []int64
	for _, g := range []string{"g1", "g2"} {
		var w resp.Writer
		f.machines[g].ApplyArgs(f.now, [][]byte{[]byte("RL.CHECK"), []byte("x"), []byte("COST"), []byte("0"),
			[]byte("DESCRIPTOR"), []byte("user"), []byte(u)}, &w)
		v, err := resp.DecodeReply(w.Buf)
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, v.([]any)[2].(int64))
	}
	return min(left[0], left[1]) // the group without the counter says 10
}

func newLostRig(t *testing.T) (*Coordinator, *fakeMembers, [][]byte, []string) {
	t.Helper()
	mp, err := shardmap.Parse([]byte(twoGroups))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := shardmap.NewRouter(mp, "g1")
	r.SetLeader(1, "127.0.0.1:7002")
	f := &fakeMembers{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), machines: map[string]*machine.Machine{}}
	for _, g := range []string{"g1", "g2"} {
		m := machine.New(machine.Options{})
		var w resp.Writer
		m.ApplyArgs(f.now, [][]byte{[]byte("RL.RULES"), []byte("LOAD"), []byte("x.yaml"), []byte(lostRules)}, &w)
		if string(w.Buf) != "+OK\r\n" {
			t.Fatalf("rules: %q", w.Buf)
		}
		f.machines[g] = m
	}
	c := mustNew(t, Config{Router: r, Machine: f.machines["g1"], Members: f, Timeout: 300 * time.Millisecond, FinishRetry: 10 * time.Second,
		OwnLeader: func() (string, bool) { return "127.0.0.1:7001", true },
		MemberAt: func(addr string) (member.Addr, bool) {
			g := map[string]string{"127.0.0.1:7001": "g1", "127.0.0.1:7002": "g2"}[addr]
			return member.Addr{Port: addr, Group: g}, g != ""
		}})
	t.Cleanup(c.Close)
	// Users in both groups.
	args := [][]byte{[]byte("RL.CHECK"), []byte("x")}
	var users []string
	for i := range 8 {
		u := fmt.Sprintf("u%d", i)
		users = append(users, u)
		args = append(args, []byte("DESCRIPTOR"), []byte("user"), []byte(u))
	}
	_, descs, _ := f.machines["g1"].Split(args, nil)
	groups := map[int]bool{}
	for _, d := range descs {
		groups[r.Owner(d.Slot)] = true
	}
	if len(groups) != 2 {
		t.Fatalf("the check touches %d groups", len(groups))
	}
	return c, f, args, users
}

// A part's answer is lost after it applied: the coordinator gives the
// charge back and, once the cancel is confirmed, tells the caller the
// truth — nothing was charged (TRYAGAIN, ErrPart) — and every counter is
// whole again.
func TestLostPartConfirmedCancelTellsTheTruth(t *testing.T) {
	c, f, args, users := newLostRig(t)
	f.lose = "g2"
	_, err := c.Decide(context.Background(), args)
	if !errors.Is(err, ErrPart) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a lost part, its cancel confirmed: %v", err)
	}
	c.Drain()
	for _, u := range users {
		if left := f.remaining(t, u); left != 10 {
			t.Fatalf("user %s: %d left after the check was given back", u, left)
		}
	}
	if k := c.Counts(); k.Failed != 1 || k.Unknown != 0 || k.Cancelled != 2 {
		t.Fatalf("counts %+v", k)
	}
}

// An admitted check's parts are held for 10 s (the README's bound on the
// reservations a group holds for checks across groups), so its charge is
// kept without a further call, and no longer.
func TestAdmittedCheckPartsAreHeldTenSeconds(t *testing.T) {
	c, f, args, users := newLostRig(t)
	if _, err := c.Decide(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	if len(f.reserveTTLs) != 2 {
		t.Fatalf("%d parts sent for a check across two groups", len(f.reserveTTLs))
	}
	for _, ttl := range f.reserveTTLs {
		if ttl != 10 {
			t.Fatalf("a check's part held for %d s, want 10", ttl)
		}
	}
	for _, u := range users {
		if left := f.remaining(t, u); left != 9 {
			t.Fatalf("user %s: %d left after an admitted check", u, left)
		}
	}
}

// Its cancel cannot be delivered within the call: the caller is told the
// outcome is unknown — never that nothing was charged — and the cancel,
// sent again, gives the charge back once it gets through.
func TestLostPartUnconfirmedCancelIsUnknownThenGivenBack(t *testing.T) {
	c, f, args, users := newLostRig(t)
	f.lose, f.cancelFails = "g2", 8
	_, err := c.Decide(context.Background(), args)
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a lost part whose cancel is not confirmed: %v", err)
	}
	if k := c.Counts(); k.Unknown != 1 || k.Failed != 0 {
		t.Fatalf("counts %+v", k)
	}
	c.Drain() // the cancels keep going until one is delivered
	for _, u := range users {
		if left := f.remaining(t, u); left != 10 {
			t.Fatalf("user %s: %d left after the cancel got through", u, left)
		}
	}
}

// A part whose request is still on its way when its cancel arrives: the
// cancel finds nothing, leaves a tombstone, is confirmed; the part, when
// it arrives, is turned away and charges nothing.
func TestPartArrivingAfterItsCancelChargesNothing(t *testing.T) {
	c, f, args, users := newLostRig(t)
	f.hold = "g2"
	_, err := c.Decide(context.Background(), args)
	if !errors.Is(err, ErrPart) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a held part, its cancel confirmed: %v", err)
	}
	c.Drain()
	if got := f.release(); !strings.HasPrefix(got, "-TRYAGAIN the reservation id was cancelled") {
		t.Fatalf("the late part: %q, want turned away", got)
	}
	for _, u := range users {
		if left := f.remaining(t, u); left != 10 {
			t.Fatalf("user %s: %d left after the late part", u, left)
		}
	}
}

// A part never sent (its group has no leader known) charged nothing: the
// check is CLUSTERDOWN (ErrNoLeader) at once, never "unknown", and the
// other group's part is given back.
func TestPartOfAGroupWithoutALeaderChargesNothing(t *testing.T) {
	c, f, args, users := newLostRig(t)
	c.cfg.Router.SetLeader(1, "")
	_, err := c.Decide(context.Background(), args)
	if !errors.Is(err, ErrNoLeader) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a group without a leader: %v", err)
	}
	c.Close() // the cancels to the leaderless group give up
	for _, u := range users {
		if left := f.remaining(t, u); left != 10 {
			t.Fatalf("user %s: %d left", u, left)
		}
	}
}

// A reservation's part still on its way when its cancel arrives — a
// partition held it — is turned away however late it comes within the
// reservation's ttl: the cancel's tombstone lives as long as the part
// could (the reservation's hour here, not a check's 10 s part ttl).
func TestLateReservationPartChargesNothing(t *testing.T) {
	c, f, args, users := newLostRig(t)
	f.hold = "g2"
	reserve := append([][]byte{[]byte("RL.RESERVE"), []byte("x"), []byte("res-1"), []byte("3600")}, args[2:]...)
	_, err := c.Reserve(context.Background(), reserve)
	if !errors.Is(err, ErrPart) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a held part of a reservation, its cancel confirmed: %v", err)
	}
	c.Drain()
	f.mu.Lock()
	f.now += int64(10 * time.Minute) // long past a check's part ttl, within the reservation's
	f.mu.Unlock()
	if got := f.release(); !strings.HasPrefix(got, "-TRYAGAIN the reservation id was cancelled") {
		t.Fatalf("the late part, 10 minutes on: %q, want turned away", got)
	}
	for _, u := range users {
		if left := f.remaining(t, u); left != 10 {
			t.Fatalf("user %s: %d left after the late part", u, left)
		}
	}
}

// exhaust spends user u's whole limit in the group that holds it.
func (f *fakeMembers) exhaust(t *testing.T, c *Coordinator, u string) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	args := [][]byte{[]byte("RL.CHECK"), []byte("x"), []byte("COST"), []byte("10"), []byte("DESCRIPTOR"), []byte("user"), []byte(u)}
	_, descs, _ := f.machines["g1"].Split(args, nil)
	g := c.cfg.Router.Map().Groups[c.cfg.Router.Owner(descs[0].Slot)].ID
	var w resp.Writer
	f.machines[g].ApplyArgs(f.now, args, &w)
	if v, err := resp.DecodeReply(w.Buf); err != nil || v.([]any)[0].(int64) != 0 {
		t.Fatalf("exhausting %s: %q", u, w.Buf)
	}
	return g
}

// A check refused by one group's part while another's admitted: the
// caller is told "refused" — nothing charged — only once the admitted
// part's cancel is confirmed, so a coordinator killed just after the
// reply leaves no charge behind; every counter is whole when the answer
// comes, with no waiting for the cancels.
func TestRefusedCheckIsWholeWhenAnswered(t *testing.T) {
	c, f, args, users := newLostRig(t)
	g := f.exhaust(t, c, users[0])
	res, err := c.Decide(context.Background(), args)
	if err != nil || !res.Limited {
		t.Fatalf("a check with %s exhausted (in %s): %+v %v, want refused", users[0], g, res, err)
	}
	for _, u := range users[1:] {
		if left := f.remaining(t, u); left != 10 {
			t.Fatalf("user %s: %d left when the refusal was answered", u, left)
		}
	}
}

// Its cancel cannot be confirmed within the call: the caller is told the
// outcome is unknown, never "refused", and the charge is given back once
// the cancel gets through.
func TestRefusedCheckUnconfirmedCancelIsUnknown(t *testing.T) {
	c, f, args, users := newLostRig(t)
	f.exhaust(t, c, users[0])
	f.cancelFails = 8
	_, err := c.Decide(context.Background(), args)
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a refused check whose cancel is not confirmed: %v", err)
	}
	c.Drain()
	for _, u := range users[1:] {
		if left := f.remaining(t, u); left != 10 {
			t.Fatalf("user %s: %d left after the cancel got through", u, left)
		}
	}
}

// A settle across groups that settled one group's parts and not the
// other's (refused there, nothing applied) says so — settled in part,
// never "nothing applied" — and the same settle again settles the rest.
func TestSettleInPartSaysSo(t *testing.T) {
	for _, refusing := range []string{"g1", "g2"} { // the head's group, the other
		t.Run(refusing, func(t *testing.T) {
			c, f, args, _ := newLostRig(t)
			reserve := append([][]byte{[]byte("RL.RESERVE"), []byte("x"), []byte("res-1"), []byte("3600")}, args[2:]...)
			if _, err := c.Reserve(context.Background(), reserve); err != nil {
				t.Fatal(err)
			}
			f.settleRefused = refusing
			settle := [][]byte{[]byte("RL.CANCEL"), []byte("x"), []byte("res-1")}
			_, _, err := c.Settle(context.Background(), settle)
			want := ErrSettledInPart
			if refusing == "g2" {
				want = ErrPart // g2's parts go first: nothing was settled
			}
			if !errors.Is(err, want) {
				t.Fatalf("a settle refused in %s: %v, want %v", refusing, err, want)
			}
			rows, held, err := c.Settle(context.Background(), settle)
			if err != nil || !held || len(rows) == 0 {
				t.Fatalf("the same settle again: %v %v %v", rows, held, err)
			}
		})
	}
}
