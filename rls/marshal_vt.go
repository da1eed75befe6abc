//go:build vtprotobuf

package rls

import (
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/mem"
)

// marshalResponse encodes m with the generated vtproto code into a buffer
// from grpc's pool.
func marshalResponse(m *pb.RateLimitResponse) (mem.BufferSlice, error) {
	size := m.SizeVT()
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVTStrict((*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}
