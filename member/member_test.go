package member

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/memberpb"
	"github.com/sluice-rl/sluice/raftmux"
	"github.com/sluice-rl/sluice/shardmap"
)

// The messages survive a round trip, and every cut of them is refused or
// decodes to something else, never a panic or the whole message.
func TestMessagesRoundTripAndCuts(t *testing.T) {
	msgs := []proto.Message{
		&memberpb.ApplyRequest{Group: "g2", Command: [][]byte{[]byte("RL.PART"), []byte("RESERVE"), {0, 1, 2}, []byte("")}},
		&memberpb.ApplyReply{Code: memberpb.Code_APPLIED, Reply: []byte(":1\r\n")},
		&memberpb.ApplyReply{Code: memberpb.Code_NOT_LEADER, Detail: "not the leader", Leader: "127.0.0.1:7001"},
		placeMessage("g2", &machine.PlacementRequest{Kind: machine.PlaceImport, Epoch: 9, Ranges: [][2]int{{0, 5}, {9, 9}}, Digest: "ab",
			Payload: []byte{0, 1, 2}}),
		placeMessage("g2", &machine.PlacementRequest{Kind: machine.PlaceApply, Config: [][]byte{[]byte("RL.SCALE"), []byte("x"), []byte("")}}),
		placeReply(machine.PlacementResult{}, "", &machine.StaleEpochError{Epoch: 4, Reply: "STALEEPOCH 4"}),
		placeReply(machine.PlacementResult{Digest: "3fa2"}, "", nil),
		partMessage("g2", &machine.PartRequest{Kind: machine.PartReserve, RLS: true, Domain: "x", Rules: "abcd", ID: "id1", TTL: 10,
			Head: [][]byte{[]byte("1")}, Descriptors: [][][]byte{{[]byte("1"), []byte("-"), []byte("k"), []byte("v")}, {[]byte("")}}}),
		partReply(machine.PartResult{Limited: true, Check: machine.CheckResult{Limited: true, Limit: 10, Remaining: 0, RetryAfter: 3, Name: "per-user", Window: 60},
			Statuses: []machine.RLSStatus{{Code: 2, RequestsPerUnit: 10, Unit: 2, Name: "n", Remaining: 0, ResetSeconds: 5, Shadow: true, PolicyQuota: 10, PolicyWindow: 60}}}, nil),
		partReply(machine.PartResult{}, &machine.PartError{Kind: machine.ErrRulesDiffer, Reply: "ERR RULESDIFFER …"}),
		&memberpb.MemberReport{Code: memberpb.Code_APPLIED, Leader: true, LogTimeNs: 5, Fenced: true, Epoch: 3,
			Ranges: []*memberpb.SlotRange{{From: 1, To: 2}}, Jobs: []*memberpb.JobView{{Target: "g2", UntilMs: 9}}},
	}
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		back := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, back); err != nil || !proto.Equal(m, back) {
			t.Fatalf("%T: round trip %v: %v", m, back, err)
		}
		for cut := range len(b) {
			part := m.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(b[:cut], part); err == nil && proto.Equal(m, part) {
				t.Fatalf("%T cut at %d of %d decodes whole", m, cut, len(b))
			}
		}
	}
	// Every code this version sends maps back to its sentinel.
	for _, c := range wireCodes {
		if got := errOf(codeOf(c.err)); got != c.err {
			t.Fatalf("code %v: %v, want %v", c.code, got, c.err)
		}
	}
	if errOf(memberpb.Code(99)) != ErrUnknownOutcome || codeOf(errors.New("other")) != memberpb.Code_UNKNOWN_OUTCOME {
		t.Fatal("an unknown code or error must read as an unknown outcome")
	}
	if errOf(memberpb.Code_APPLIED) != nil {
		t.Fatal("APPLIED is no error")
	}
}

// servePort is a member port for group on loopback whose placement
// requests are logged with place.
func servePort(t *testing.T, secret []byte, group string, place PlaceFunc) string {
	t.Helper()
	mux, err := raftmux.Listen("127.0.0.1:0", secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := mux.Members(group)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(ln, ServerConfig{Group: group, Place: place})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(); mux.Close() })
	return mux.Addr().String()
}

// digestOf asks for domain's digest: the tests' placement request.
func digestOf(domain string) *machine.PlacementRequest {
	return &machine.PlacementRequest{Kind: machine.PlaceDigest, Domain: domain}
}

func TestCallsAndWhatBecameOfThem(t *testing.T) {
	secret := []byte("a cluster secret of some length")
	var applied atomic.Int64
	port := servePort(t, secret, "g1", func(_ context.Context, req *machine.PlacementRequest) (machine.PlacementResult, string, error) {
		switch req.Domain {
		case "applied":
			applied.Add(1)
			return machine.PlacementResult{Digest: "d-" + req.Domain}, "", nil
		case "follower":
			return machine.PlacementResult{}, "127.0.0.1:6380", ErrNotLeader
		case "electing":
			return machine.PlacementResult{}, "", fmt.Errorf("%w: the leader changed", ErrNotApplied)
		case "lost":
			return machine.PlacementResult{}, "", errors.New("raft: timed out enqueuing")
		case "stale":
			return machine.PlacementResult{}, "", &machine.StaleEpochError{Epoch: 7, Reply: "STALEEPOCH 7 this group is past the import's epoch 5"}
		case "answered":
			return machine.PlacementResult{}, "", &machine.ReplyError{Reason: machine.ReasonRulesDiffer, Reply: "ERR words nobody reads"}
		}
		return machine.PlacementResult{}, "", fmt.Errorf("%w: not a member command", ErrRefused)
	})
	c := NewClient(ClientConfig{Secret: secret})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	to := Addr{Port: port, Group: "g1"}
	call := func(to Addr, domain string) (machine.PlacementResult, error) {
		return c.Place(ctx, to, digestOf(domain))
	}
	if res, err := call(to, "applied"); err != nil || res.Digest != "d-applied" {
		t.Fatalf("applied: %+v %v", res, err)
	}
	_, err := call(to, "follower")
	if leader, ok := LeaderOf(err); !ok || leader != "127.0.0.1:6380" || !errors.Is(err, ErrNotLeader) || !NothingApplied(err) {
		t.Fatalf("not leader: %v (%q)", err, leader)
	}
	if _, err := call(to, "electing"); !errors.Is(err, ErrNotApplied) || !NothingApplied(err) {
		t.Fatalf("not applied: %v", err)
	}
	if _, err := call(to, "lost"); !errors.Is(err, ErrUnknownOutcome) || NothingApplied(err) {
		t.Fatalf("an error of no known kind must be an unknown outcome: %v", err)
	}
	// An import refused at a passed epoch crosses typed, with the epoch;
	// an applied request's error with its reason.
	var stale *machine.StaleEpochError
	if _, err := call(to, "stale"); !errors.As(err, &stale) || stale.Epoch != 7 || !errors.Is(err, machine.ErrStaleEpoch) {
		t.Fatalf("a stale import: %v", err)
	}
	var answered *machine.ReplyError
	if _, err := call(to, "answered"); !errors.As(err, &answered) || answered.Reason != machine.ReasonRulesDiffer {
		t.Fatalf("an applied request's error: %v", err)
	}
	if _, err := call(to, "other"); !errors.Is(err, ErrRefused) {
		t.Fatalf("refused: %v", err)
	}
	if _, err := call(Addr{Port: port, Group: "g2"}, "applied"); !errors.Is(err, ErrWrongGroup) && !errors.Is(err, ErrUnreachable) {
		t.Fatalf("another group: %v", err)
	}
	// A request no group can log is refused before it is sent; one of a
	// kind the receiver does not know, by the receiver.
	if _, err := c.Place(ctx, to, &machine.PlacementRequest{Kind: machine.PlaceImport}); !errors.Is(err, ErrRefused) {
		t.Fatalf("an import of nothing: %v", err)
	}
	cc, err := c.conn(to)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := memberpb.NewMemberClient(cc).Place(ctx, &memberpb.PlaceRequest{Group: "g1", Kind: 99}); err != nil || out.GetCode() != memberpb.Code_REFUSED {
		t.Fatalf("a kind this version does not know: %v %v", out, err)
	}
	// A caller without the secret, or with another, is never heard.
	before := applied.Load()
	for _, s := range [][]byte{nil, []byte("another secret of some length")} {
		stranger := NewClient(ClientConfig{Secret: s})
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := stranger.Place(sctx, to, digestOf("applied"))
		scancel()
		stranger.Close()
		if err == nil || !NothingApplied(err) && !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("a caller without the secret: %v", err)
		}
	}
	if applied.Load() != before {
		t.Fatal("a caller without the secret had a command applied")
	}
	// Nothing listening: unreachable, so known not to have applied.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := ln.Addr().String()
	ln.Close()
	if _, err := call(Addr{Port: gone, Group: "g1"}, "applied"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("nothing listening: %v", err)
	}
}

// A call that names another group than the one its server applies for is
// refused before anything is applied — the mux routes by the connection's
// header, the server checks the request's own group as well (a 0.4.0
// member's Apply too).
func TestApplyOfAnotherGroupIsRefused(t *testing.T) {
	mux, ln := listenMembers(t, "g1")
	var applied atomic.Int64
	srv := mustServe(t, ln, ServerConfig{Group: "g2",
		Place: func(context.Context, *machine.PlacementRequest) (machine.PlacementResult, string, error) {
			applied.Add(1)
			return machine.PlacementResult{}, "", nil
		},
		Apply: func(context.Context, [][]byte) ([]byte, string, error) {
			applied.Add(1)
			return []byte("+OK\r\n"), "", nil
		}})
	defer srv.Stop()
	c, ctx := testClient(t)
	to := Addr{Port: mux.Addr().String(), Group: "g1"}
	if _, err := c.Place(ctx, to, digestOf("")); !errors.Is(err, ErrWrongGroup) || !NothingApplied(err) {
		t.Fatalf("a call for g1 to g2's server: %v", err)
	}
	cc, err := c.conn(to)
	if err != nil {
		t.Fatal(err)
	}
	out, err := memberpb.NewMemberClient(cc).Apply(ctx, &memberpb.ApplyRequest{Group: "g1", Command: [][]byte{[]byte("RL.PART"), []byte("DIGEST")}})
	if err != nil || out.GetCode() != memberpb.Code_WRONG_GROUP {
		t.Fatalf("a 0.4.0 member's call for g1 to g2's server: %v %v", out, err)
	}
	if applied.Load() != 0 {
		t.Fatal("a call for another group was applied")
	}
}

// A raw connection without the proof gets no gRPC answer: it is closed
// before the member server sees a byte.
func TestMemberPortClosesWhoCannotProveMembership(t *testing.T) {
	var calls atomic.Int64
	port := servePort(t, []byte("a cluster secret of some length"), "g1",
		func(context.Context, *machine.PlacementRequest) (machine.PlacementResult, string, error) {
			calls.Add(1)
			return machine.PlacementResult{}, "", nil
		})
	c, err := net.Dial("tcp", port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The member header, then gRPC's preface as a client would send it.
	c.Write(append([]byte{0, 2}, "g1"...))
	c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(c)
	if bytes.Contains(got, []byte("\x00\x00")) && len(got) > 64 {
		t.Fatalf("the member server answered a stranger: %q", got)
	}
	if calls.Load() != 0 {
		t.Fatal("a stranger's call applied")
	}
}

// A report crosses whole: leader, log time, slots, migrations; a range
// that is not one (a newer or broken sender's) is dropped, not trusted.
func TestReportCrossesWhole(t *testing.T) {
	want := Report{Leader: true, LogTime: 1_700_000_000_123_456_789, Fenced: true, Slots: shardmap.Report{
		Epoch: 7, Ranges: [][2]int{{0, 100}, {200, 16383}},
		Jobs: []shardmap.JobView{{Target: "g2", Ranges: [][2]int{{0, 50}}}, {Target: "g3", Ranges: [][2]int{{60, 60}}, Until: 1234}},
	}}
	b, err := proto.Marshal(want.message())
	if err != nil {
		t.Fatal(err)
	}
	var m memberpb.MemberReport
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if got := reportOf(&m); !reflect.DeepEqual(got, want) {
		t.Fatalf("report round trip:\n got %+v\nwant %+v", got, want)
	}
	m.Ranges = append(m.Ranges, &memberpb.SlotRange{From: 9, To: 3}, &memberpb.SlotRange{From: 0, To: 16384})
	if got := reportOf(&m); !reflect.DeepEqual(got.Slots.Ranges, want.Slots.Ranges) {
		t.Fatalf("bad ranges taken: %v", got.Slots.Ranges)
	}
	if got := reportOf(&memberpb.MemberReport{Epoch: 3, Ranges: m.Ranges}); got.Fenced || got.Slots.Epoch != 0 {
		t.Fatalf("an unfenced report carries slots: %+v", got)
	}
}

// Over the port: the report of the group asked for, WRONG_GROUP for
// another.
func TestReportOverThePort(t *testing.T) {
	want := Report{Leader: true, LogTime: 42, Fenced: true, Slots: shardmap.Report{Epoch: 2, Ranges: [][2]int{{5, 9}}}}
	mux, ln := listenMembers(t, "g1")
	srv := mustServe(t, ln, ServerConfig{Group: "g1", Report: func() Report { return want }})
	defer srv.Stop()
	c, ctx := testClient(t)
	got, err := c.Report(ctx, Addr{Port: mux.Addr().String(), Group: "g1"})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("report: %+v %v", got, err)
	}
	if _, err := c.Report(ctx, Addr{Port: mux.Addr().String(), Group: "g2"}); err == nil {
		t.Fatal("a report of a group the member is not of")
	}
}

// A part crosses typed both ways: the request as the coordinator built
// it, the result as the group's apply gave it, a refusal with its kind.
func TestPartOverThePort(t *testing.T) {
	want := machine.PartResult{Limited: false, Check: machine.CheckResult{Limit: 10, Remaining: 7, RetryAfter: -1, ResetAfter: 4, Name: "per-user", Window: 86400},
		Statuses: []machine.RLSStatus{{Code: 1, RequestsPerUnit: 20, Unit: 3, Name: "r", Remaining: 17, ResetSeconds: 60, PolicyQuota: 20, PolicyWindow: 60}}}
	sent := &machine.PartRequest{Kind: machine.PartReserve, Domain: "x", Rules: "d1", ID: "id", TTL: 10,
		Head: [][]byte{[]byte("COST"), []byte("2")}, Descriptors: [][][]byte{{[]byte("DESCRIPTOR"), []byte("user"), []byte("u")}},
		Deadline: 1_767_225_600_000_000_000}
	var got *machine.PartRequest
	mux, ln := listenMembers(t, "g1")
	srv := mustServe(t, ln, ServerConfig{Group: "g1", Part: func(_ context.Context, r *machine.PartRequest) (machine.PartResult, string, error) {
		got = r
		switch r.Domain {
		case "fenced":
			return machine.PartResult{}, "", &machine.PartError{Kind: machine.ErrFenced, Reply: "TRYAGAIN slot 5 is not this group's"}
		case "follower":
			return machine.PartResult{}, "127.0.0.1:9", ErrNotLeader
		case "late":
			return machine.PartResult{}, "", r.Late(r.Deadline + 1)
		}
		return want, "", nil
	}})
	defer srv.Stop()
	c, ctx := testClient(t)
	to := Addr{Port: mux.Addr().String(), Group: "g1"}
	res, err := c.Part(ctx, to, sent)
	if err != nil || !reflect.DeepEqual(res, want) {
		t.Fatalf("part: %+v %v", res, err)
	}
	if !reflect.DeepEqual(got, sent) {
		t.Fatalf("the request arrived as %+v, sent %+v", got, sent)
	}
	_, err = c.Part(ctx, to, &machine.PartRequest{Kind: machine.PartDecide, Domain: "fenced"})
	var pe *machine.PartError
	if !errors.As(err, &pe) || !errors.Is(err, machine.ErrFenced) || pe.Reply != "TRYAGAIN slot 5 is not this group's" {
		t.Fatalf("a fenced part: %v", err)
	}
	_, err = c.Part(ctx, to, &machine.PartRequest{Kind: machine.PartReserve, Domain: "late", ID: "i", Deadline: 5})
	if !errors.As(err, &pe) || !errors.Is(err, machine.ErrPartLate) {
		t.Fatalf("a late part: %v", err)
	}
	_, err = c.Part(ctx, to, &machine.PartRequest{Kind: machine.PartCancel, Domain: "follower", ID: "i"})
	if leader, ok := LeaderOf(err); !errors.Is(err, ErrNotLeader) || !ok || leader != "127.0.0.1:9" {
		t.Fatalf("a part at a follower: %v", err)
	}
	if _, err := c.Part(ctx, to, &machine.PartRequest{Kind: machine.PartKind(9), Domain: "x"}); !errors.Is(err, ErrRefused) {
		t.Fatalf("a part kind unknown: %v", err)
	}
}

// A forwarded call crosses with its outcome (an error reply as its Err, a
// refusal as Limited with its statuses); a member that does not lead
// says who does, and nothing was applied.
func TestDecideOverThePort(t *testing.T) {
	mux, ln := listenMembers(t, "g1")
	srv := mustServe(t, ln, ServerConfig{Group: "g1", Decide: eachCall(func(cmd [][]byte) (machine.Outcome, string, error) {
		switch string(cmd[1]) {
		case "follower":
			return machine.Outcome{}, "127.0.0.1:9", ErrNotLeader
		case "moved":
			to := machine.Moved(12, "127.0.0.1:7002")
			return machine.Outcome{Err: to.Reply, Refusal: to}, "", nil
		case "again":
			to := machine.TryAgain("a slot is moving")
			return machine.Outcome{Err: to.Reply, Refusal: to}, "", nil
		case "down":
			to := machine.ClusterDown("The cluster is down")
			return machine.Outcome{Err: to.Reply, Refusal: to}, "", nil
		case "fenced":
			return machine.Outcome{Err: "TRYAGAIN slot 3 is not this group's", Refusal: machine.ErrFenced}, "", nil
		case "wrong":
			return machine.Outcome{Err: "ERR MOVED is a word, not a redirect", Reason: machine.ReasonInvalid}, "", nil
		case "unknown":
			return machine.Outcome{Err: "ERR whatever the text says", Reason: machine.ReasonUnknown}, "", nil
		case "lease":
			return machine.Outcome{Leased: true, Lease: machine.LeaseResult{Granted: 7, TTL: 3e9, Refresh: 2e9, Denied: true, Unlimited: true, Grant: 1_900_000_000_000_000_001}}, "", nil
		}
		return machine.Outcome{Limited: true, Statuses: []machine.RLSStatus{{Code: 2, RequestsPerUnit: 5, Unit: 1, Remaining: 0, ResetSeconds: 3}}}, "", nil
	})})
	defer srv.Stop()
	c, ctx := testClient(t)
	to := Addr{Port: mux.Addr().String(), Group: "g1"}
	call := func(domain string) (machine.Outcome, error) {
		return c.Decide(ctx, to, [][]byte{[]byte("RL.SHOULDRATELIMIT"), []byte(domain), []byte("1")})
	}
	out, err := call("d")
	if err != nil || !out.Limited || len(out.Statuses) != 1 || out.Statuses[0].RequestsPerUnit != 5 || out.Statuses[0].ResetSeconds != 3 {
		t.Fatalf("decided: %+v %v", out, err)
	}
	// Redirects cross typed: what members act on is the kind and the
	// address, never the reply's text.
	if out, err := call("moved"); err != nil || out.Err != "MOVED 12 127.0.0.1:7002" ||
		!errors.Is(out.Refusal, machine.ErrMoved) || machine.MovedTo(out.Refusal) != "127.0.0.1:7002" {
		t.Fatalf("a MOVED: %+v %v", out, err)
	}
	for domain, kind := range map[string]error{"again": machine.ErrTryAgain, "down": machine.ErrClusterDown, "fenced": machine.ErrFenced} {
		out, err := call(domain)
		// The server gives no reason (as 0.4.0 does): a typed redirect
		// still reads as nothing applied.
		if err != nil || !errors.Is(out.Refusal, kind) || machine.MovedTo(out.Refusal) != "" || out.Err == "" || out.Refusal.Error() != out.Err ||
			out.Reason != machine.ReasonNotNow {
			t.Fatalf("%s: %+v %v", domain, out, err)
		}
	}
	if !machine.Retryable(func() error { o, _ := call("fenced"); return o.Refusal }()) {
		t.Fatal("a fenced call is not retryable")
	}
	// A lease's answer crosses whole (a follower's RLQS door forwards it).
	if out, err := call("lease"); err != nil || !out.Leased || out.Lease != (machine.LeaseResult{Granted: 7, TTL: 3e9, Refresh: 2e9, Denied: true, Unlimited: true, Grant: 1_900_000_000_000_000_001}) {
		t.Fatalf("a lease: %+v %v", out, err)
	}
	if out, err := call("d"); err != nil || out.Leased {
		t.Fatalf("a decision is no lease: %+v %v", out, err)
	}
	if out, err := call("wrong"); err != nil || out.Refusal != nil || out.Err == "" || out.Reason != machine.ReasonInvalid {
		t.Fatalf("an error reply that is no redirect: %+v %v", out, err)
	}
	// Why an answer is an error crosses typed, whatever its text says.
	if out, err := call("unknown"); err != nil || out.Reason != machine.ReasonUnknown {
		t.Fatalf("an unknown outcome: %+v %v", out, err)
	}
	_, err = call("follower")
	if leader, ok := LeaderOf(err); !ok || leader != "127.0.0.1:9" || !NothingApplied(err) {
		t.Fatalf("at a follower: %v", err)
	}
	if _, err := c.Decide(ctx, Addr{Port: to.Port, Group: "g2"}, [][]byte{[]byte("RL.SHOULDRATELIMIT")}); !NothingApplied(err) {
		t.Fatalf("another group: %v", err)
	}
}

// eachCall is a DecideFunc deciding a batch call by call; a not-leader
// answer to any is the batch's.
func eachCall(decide func(cmd [][]byte) (machine.Outcome, string, error)) DecideFunc {
	return func(_ context.Context, cmds [][][]byte) ([]machine.Outcome, string, error) {
		outs := make([]machine.Outcome, len(cmds))
		for i, cmd := range cmds {
			out, leader, err := decide(cmd)
			if err != nil {
				return nil, leader, err
			}
			outs[i] = out
		}
		return outs, "", nil
	}
}

// listenMembers is a member port on 127.0.0.1 (no secret) and its
// member-call listener for group, closed when the test ends.
func listenMembers(t testing.TB, group string) (*raftmux.Mux, net.Listener) {
	t.Helper()
	mux, err := raftmux.Listen("127.0.0.1:0", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mux.Close() })
	ln, err := mux.Members(group)
	if err != nil {
		t.Fatal(err)
	}
	return mux, ln
}

// testClient is a client without a secret, and a context of 5 s, both
// ended with the test.
func testClient(t *testing.T) (*Client, context.Context) {
	c := NewClient(ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(func() { cancel(); c.Close() })
	return c, ctx
}

// mustServe is Serve that fails the test on an invalid config.
func mustServe(t testing.TB, ln net.Listener, cfg ServerConfig) *Server {
	t.Helper()
	srv, err := Serve(ln, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// A config without a group id, or with one the member port cannot carry,
// serves nothing; a server without a handler refuses its calls, nothing
// applied.
func TestServerConfig(t *testing.T) {
	for _, group := range []string{"", strings.Repeat("g", 256)} {
		if _, err := Serve(nil, ServerConfig{Group: group}); !errors.Is(err, ErrConfig) {
			t.Fatalf("group of %d bytes: %v", len(group), err)
		}
	}
	mux, ln := listenMembers(t, "g1")
	srv := mustServe(t, ln, ServerConfig{Group: "g1"})
	defer srv.Stop()
	c, ctx := testClient(t)
	to := Addr{Port: mux.Addr().String(), Group: "g1"}
	if _, err := c.Place(ctx, to, digestOf("")); !errors.Is(err, ErrRefused) {
		t.Fatalf("Place without a handler: %v", err)
	}
	if _, err := c.Report(ctx, to); !errors.Is(err, ErrRefused) {
		t.Fatalf("Report without a reporter: %v", err)
	}
}

// A member not called for IdleAfter loses its connection and batcher at
// the client's next call (a member removed, or moved to another address,
// is not kept for the life of the process); one called again is dialed
// again and answers.
func TestIdleMembersAreClosed(t *testing.T) {
	now := time.Unix(1e9, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	var ports []string
	for _, g := range []string{"g1", "g2"} {
		mux, err := raftmux.Listen("127.0.0.1:0", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer mux.Close()
		ln, _ := mux.Members(g)
		srv := mustServe(t, ln, ServerConfig{Group: g, Report: func() Report { return Report{LogTime: 7} },
			Decide: eachCall(func([][]byte) (machine.Outcome, string, error) { return machine.Outcome{}, "", nil })})
		defer srv.Stop()
		ports = append(ports, mux.Addr().String())
	}
	a, b := Addr{Port: ports[0], Group: "g1"}, Addr{Port: ports[1], Group: "g2"}
	c := NewClient(ClientConfig{IdleAfter: time.Minute, Now: clock})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	known := func() (conns, batchers int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.conns), len(c.batchers)
	}
	if _, err := c.Decide(ctx, a, [][]byte{[]byte("RL.SHOULDRATELIMIT")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Report(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n, m := known(); n != 2 || m != 1 {
		t.Fatalf("%d connections and %d batchers after calls to two members", n, m)
	}
	advance(40 * time.Second)
	if _, err := c.Report(ctx, b); err != nil { // b is busy, a idle 40 s
		t.Fatal(err)
	}
	advance(40 * time.Second)
	if _, err := c.Report(ctx, b); err != nil { // a idle 80 s: closed
		t.Fatal(err)
	}
	if n, m := known(); n != 1 || m != 0 {
		t.Fatalf("%d connections and %d batchers once a member was idle a minute", n, m)
	}
	if got, err := c.Report(ctx, a); err != nil || got.LogTime != 7 {
		t.Fatalf("a member called again after it was closed: %+v %v", got, err)
	}
}

// Every machine.Reason has its own code on the wire, and reads back as
// itself; a code this version does not know reads as none.
func TestReasonsCrossTheWire(t *testing.T) {
	seen := map[memberpb.Reason]bool{}
	for r := machine.ReasonNone; r <= machine.ReasonUnknown; r++ {
		w := reasonOnWire(r)
		if seen[w] || reasonOf(w) != r {
			t.Fatalf("%v: on the wire %v, read back %v", r, w, reasonOf(w))
		}
		seen[w] = true
	}
	if reasonOf(memberpb.Reason(99)) != machine.ReasonNone {
		t.Fatal("a newer member's reason read as a known one")
	}
}
