package rls

import (
	"math/rand/v2"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// sameAsProto decodes b with decodeRequest and with proto.Unmarshal: both
// fail, or both give equal messages (unknown fields included).
func sameAsProto(t testing.TB, b []byte) {
	t.Helper()
	var mine, ref pb.RateLimitRequest
	errMine := decodeRequest(b, &mine)
	errRef := proto.Unmarshal(b, &ref)
	switch {
	case (errMine == nil) != (errRef == nil):
		t.Fatalf("%x: decodeRequest %v, proto.Unmarshal %v", b, errMine, errRef)
	case errMine == nil && !proto.Equal(&mine, &ref):
		t.Fatalf("%x:\n mine  %v\n proto %v", b, &mine, &ref)
	}
}

// seedRequests are requests as Envoy sends them, and some it does not.
func seedRequests() [][]byte {
	reqs := []*pb.RateLimitRequest{
		{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "u1"}}}}},
		{Domain: "d", HitsAddend: 7, Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "a", Value: "b"}, {Key: "c", Value: ""}},
				Limit:      &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 42, Unit: typev3.RateLimitUnit_HOUR, UnitMultiplier: wrapperspb.UInt32(3)},
				HitsAddend: wrapperspb.UInt64(1 << 40), IsNegativeHits: true},
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "ü", Value: "☃"}}},
		}},
		{},
	}
	var out [][]byte
	for _, r := range reqs {
		b, _ := proto.Marshal(r)
		out = append(out, b)
	}
	// Unknown fields, a known field of another wire type, a group, a
	// message field twice (merged), invalid UTF-8.
	var b []byte
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("x"))
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 5)
	b = protowire.AppendTag(b, 12, protowire.StartGroupType)
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 12, protowire.EndGroupType)
	var d []byte
	for range 2 {
		var lim []byte
		lim = protowire.AppendTag(lim, 1, protowire.VarintType)
		lim = protowire.AppendVarint(lim, 1<<35+9)
		lim = protowire.AppendTag(lim, 7, protowire.Fixed32Type)
		lim = protowire.AppendFixed32(lim, 1)
		d = protowire.AppendTag(d, 2, protowire.BytesType)
		d = protowire.AppendBytes(d, lim)
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, d)
	out = append(out, b)
	var bad []byte
	bad = protowire.AppendTag(bad, 1, protowire.BytesType)
	bad = protowire.AppendBytes(bad, []byte{0xff, 0xfe})
	return append(out, bad)
}

func TestDecodeRequestAgreesWithProto(t *testing.T) {
	for _, b := range seedRequests() {
		sameAsProto(t, b)
		// Every cut and every flipped byte.
		for i := range b {
			sameAsProto(t, b[:i])
			for _, x := range []byte{0x00, 0x01, 0x80, 0xff, 0x0a, 0x12} {
				c := append([]byte(nil), b...)
				c[i] = x
				sameAsProto(t, c)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		sameAsProto(t, b)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, b := range seedRequests() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameAsProto(t, b) })
}

// The codec's response bytes are protobuf's, and its request reading is
// decodeRequest's, whether the bytes come in one buffer or several.
func TestCodecRoundTrip(t *testing.T) {
	c := Codec()
	resp := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OVER_LIMIT, Statuses: []*pb.RateLimitResponse_DescriptorStatus{
		{Code: pb.RateLimitResponse_OK, CurrentLimit: &pb.RateLimitResponse_RateLimit{Name: "n", RequestsPerUnit: 5, Unit: pb.RateLimitResponse_RateLimit_MINUTE}, LimitRemaining: 3},
	}}
	data, err := c.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var back pb.RateLimitResponse
	if err := proto.Unmarshal(data.Materialize(), &back); err != nil || !proto.Equal(&back, resp) {
		t.Fatalf("%v %v", &back, err)
	}
	data.Free()
	for _, b := range seedRequests()[:2] {
		var want pb.RateLimitRequest
		proto.Unmarshal(b, &want)
		for _, split := range [][]byte{nil, b[:1]} {
			slices := mem.BufferSlice{mem.SliceBuffer(b)}
			if split != nil {
				slices = mem.BufferSlice{mem.SliceBuffer(b[:1]), mem.SliceBuffer(b[1:])}
			}
			var got pb.RateLimitRequest
			if err := c.Unmarshal(slices, &got); err != nil || !proto.Equal(&got, &want) {
				t.Fatalf("%v %v", &got, err)
			}
		}
	}
}
