package rls

import (
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"

	// The standard codec, for the messages other than the service's own
	// (health, reflection).
	_ "google.golang.org/grpc/encoding/proto"
)

// Codec is the gRPC server's codec: the rate limit service's response is
// marshaled by the generated vtproto functions (no reflection; built with
// -tags vtprotobuf, as make does) into a buffer from grpc's pool, its
// request read by decodeRequest; every other
// message (health checks, reflection) goes through the standard proto
// codec. Install it with grpc.ForceServerCodecV2(rls.Codec()).
func Codec() encoding.CodecV2 {
	return codec{std: encoding.GetCodecV2("proto")}
}

type codec struct{ std encoding.CodecV2 }

func (codec) Name() string { return "proto" }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*pb.RateLimitResponse)
	if !ok {
		return c.std.Marshal(v)
	}
	return marshalResponse(m)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*pb.RateLimitRequest)
	if !ok {
		return c.std.Unmarshal(data, v)
	}
	if len(data) == 1 {
		return decodeRequest(data[0].ReadOnlyData(), m)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return decodeRequest(buf.ReadOnlyData(), m)
}
