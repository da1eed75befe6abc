//go:build !vtprotobuf

package rls

import (
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// marshalResponse encodes m with protobuf's reflection: a build without
// -tags vtprotobuf, which the generated fast code needs.
func marshalResponse(m *pb.RateLimitResponse) (mem.BufferSlice, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}
