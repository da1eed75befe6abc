package member

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"google.golang.org/grpc"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/memberpb"
)

// Every placement request crosses whole, and its answer: a result, a
// stale import with its epoch, an applied error with its reason, a
// not-leader with the leader.
func TestPlacementCrossesWhole(t *testing.T) {
	for _, r := range []machine.PlacementRequest{
		{Kind: machine.PlaceImport, Epoch: 9, Ranges: [][2]int{{0, 5}, {9, 16383}}, Digest: "ab", Payload: []byte{0, 1}},
		{Kind: machine.PlaceConfig, Digest: "cd", Payload: []byte("x")},
		{Kind: machine.PlaceApply, Config: [][]byte{[]byte("RL.RULES"), []byte("LOAD"), []byte("a.yaml"), []byte("")}},
		{Kind: machine.PlaceDigest, Domain: "d"},
	} {
		back, ok := placementRequest(placeMessage("g1", &r))
		if !ok || !reflect.DeepEqual(*back, r) {
			t.Fatalf("%+v came back as %+v (%v)", r, back, ok)
		}
		if _, err := r.Command(); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
	}
	if res, err := placeResult(placeReply(machine.PlacementResult{Digest: "3fa2", Config: "77"}, "", nil)); err != nil || res.Digest != "3fa2" || res.Config != "77" {
		t.Fatalf("a digest: %+v %v", res, err)
	}
	var stale *machine.StaleEpochError
	if _, err := placeResult(placeReply(machine.PlacementResult{}, "", &machine.StaleEpochError{Epoch: 4, Reply: "STALEEPOCH 4"})); !errors.As(err, &stale) || stale.Epoch != 4 {
		t.Fatalf("a stale import: %v", err)
	}
	var answered *machine.ReplyError
	for _, r := range []machine.Reason{machine.ReasonInvalid, machine.ReasonOutOfMemory, machine.ReasonInternal} {
		_, err := placeResult(placeReply(machine.PlacementResult{}, "", &machine.ReplyError{Reason: r, Reply: "ERR x"}))
		if !errors.As(err, &answered) || answered.Reason != r || answered.Reply != "ERR x" {
			t.Fatalf("an applied error for %v: %v", r, err)
		}
	}
	if _, err := placeResult(placeReply(machine.PlacementResult{}, "10.0.0.1:6379", ErrNotLeader)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("not the leader: %v", err)
	} else if l, _ := LeaderOf(err); l != "10.0.0.1:6379" {
		t.Fatalf("the leader: %q", l)
	}
	if _, ok := placementRequest(&memberpb.PlaceRequest{Kind: 99}); ok {
		t.Fatal("a kind this version does not know was read")
	}
}

// release040 serves what a member of 0.4.0 serves for placement: Apply
// only, with the command's words.
type release040 struct {
	apply func(command [][]byte) *memberpb.ApplyReply
}

func serve040(t *testing.T, r *release040) Addr {
	mux, ln := listenMembers(t, "g1")
	s := grpc.NewServer()
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: memberpb.ServiceName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Apply",
			Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				in := new(memberpb.ApplyRequest)
				if err := dec(in); err != nil {
					return nil, err
				}
				return r.apply(in.GetCommand()), nil
			}}},
	}, r)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return Addr{Port: mux.Addr().String(), Group: "g1"}
}

// A member of 0.4.0 serves no Place: it is sent each placement request as
// the Apply it takes, with the words it reads, and its RESP answer is
// read back typed (the rolling upgrade's rule).
func TestPlacementToARelease040Member(t *testing.T) {
	var got [][]string
	old := &release040{apply: func(command [][]byte) *memberpb.ApplyReply {
		var words []string
		for _, w := range command {
			words = append(words, string(w))
		}
		got = append(got, words)
		switch words[0] + " " + words[1] {
		case "RL.PART DIGEST":
			return &memberpb.ApplyReply{Code: memberpb.Code_APPLIED, Reply: []byte("$4\r\n3fa2\r\n")}
		case "SLUICE.CONFIG 00":
			return &memberpb.ApplyReply{Code: memberpb.Code_APPLIED, Reply: []byte("-ERR bad SLUICE.CONFIG payload\r\n")}
		case "SLUICE.IMPORT 5":
			return &memberpb.ApplyReply{Code: memberpb.Code_APPLIED, Refusal: memberpb.Refusal_STALE_EPOCH, Epoch: 7, Detail: "STALEEPOCH 7"}
		case "SLUICE.IMPORT 8":
			return &memberpb.ApplyReply{Code: memberpb.Code_NOT_LEADER, Leader: "10.0.0.2:6379"}
		}
		return &memberpb.ApplyReply{Code: memberpb.Code_APPLIED, Reply: []byte("+OK\r\n")}
	}}
	to := serve040(t, old)
	c, ctx := testClient(t)
	if res, err := c.Place(ctx, to, digestOf("d")); err != nil || res.Digest != "3fa2" {
		t.Fatalf("a digest: %+v %v", res, err)
	}
	if _, err := c.Place(ctx, to, &machine.PlacementRequest{Kind: machine.PlaceApply,
		Config: [][]byte{[]byte("RL.SCALE"), []byte("d"), []byte("0.5")}}); err != nil {
		t.Fatalf("configuration: %v", err)
	}
	var answered *machine.ReplyError
	if _, err := c.Place(ctx, to, &machine.PlacementRequest{Kind: machine.PlaceConfig, Digest: "00"}); !errors.As(err, &answered) ||
		answered.Reply != "ERR bad SLUICE.CONFIG payload" {
		t.Fatalf("a refused copy: %v", err)
	}
	var stale *machine.StaleEpochError
	if _, err := c.Place(ctx, to, &machine.PlacementRequest{Kind: machine.PlaceImport, Epoch: 5, Digest: "ab",
		Ranges: [][2]int{{0, 9}}}); !errors.As(err, &stale) || stale.Epoch != 7 {
		t.Fatalf("a stale import: %v", err)
	}
	if _, err := c.Place(ctx, to, &machine.PlacementRequest{Kind: machine.PlaceImport, Epoch: 8, Digest: "ab",
		Ranges: [][2]int{{0, 9}, {20, 20}}}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("not the leader: %v", err)
	}
	want := [][]string{{"RL.PART", "DIGEST", "d"}, {"RL.PART", "APPLY", "RL.SCALE", "d", "0.5"}, {"SLUICE.CONFIG", "00", ""},
		{"SLUICE.IMPORT", "5", "ab", "", "0-9"}, {"SLUICE.IMPORT", "8", "ab", "", "0-9", "20-20"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("0.4.0 was sent %q, want %q", got, want)
	}
}
