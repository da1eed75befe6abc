package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

// benchServer runs a server on 127.0.0.1:0 and returns a client
// connection to it.
func benchServer(b *testing.B) net.Conn {
	b.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = b.TempDir()
	s, err := New(cfg, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	if err := s.ListenOn(ln); err != nil {
		b.Fatal(err)
	}
	go s.Serve()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// throttleBatches is batches of `pipeline` CL.THROTTLE requests over
// distinct keys.
func throttleBatches(batches, pipeline int) [][]byte {
	out := make([][]byte, batches)
	for i := range out {
		for j := range pipeline {
			key := fmt.Sprintf("key:%d", i*pipeline+j)
			out[i] = fmt.Appendf(out[i], "*6\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$3\r\n100\r\n$2\r\n10\r\n$1\r\n1\r\n$1\r\n1\r\n", len(key), key)
		}
	}
	return out
}

// benchmarkThrottle sends one batch per op on one connection and reads its
// replies: the whole server loop (read, frame, dispatch, reply, write).
// allocs/op is per batch, process-wide: 0 means no command of the batch
// allocated on either side.
func benchmarkThrottle(b *testing.B, pipeline int) {
	c := benchServer(b)
	batches := throttleBatches(64, pipeline)
	// Each reply is "*5" and five integers: six lines.
	wantLines := 6 * pipeline
	buf := make([]byte, 64*1024)
	roundTrip := func(batch []byte) {
		if _, err := c.Write(batch); err != nil {
			b.Fatal(err)
		}
		for lines := 0; lines < wantLines; {
			n, err := c.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			lines += bytes.Count(buf[:n], []byte{'\n'})
		}
	}
	for _, batch := range batches { // create the keys: steady state after
		roundTrip(batch)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		roundTrip(batches[i%len(batches)])
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pipeline), "ns/cmd")
}

func BenchmarkThrottleP1(b *testing.B)  { benchmarkThrottle(b, 1) }
func BenchmarkThrottleP16(b *testing.B) { benchmarkThrottle(b, 16) }
