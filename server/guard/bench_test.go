package guard

import (
	"fmt"
	"testing"
)

// throttleStream is n pipelined CL.THROTTLE requests over distinct keys, the
// traffic the guard sits in front of.
func throttleStream(n int) []byte {
	var s []byte
	for i := range n {
		key := fmt.Sprintf("user:%d", i*7919%100000)
		s = fmt.Appendf(s, "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n", len(key), key)
	}
	return s
}

func BenchmarkValidator(b *testing.B) {
	stream := throttleStream(1000)
	v, err := NewValidator(DefaultLimits(), true)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		for src := stream; len(src) > 0; {
			n, _, err := v.Next(src)
			if err != nil {
				b.Fatal(err)
			}
			src = src[n:]
		}
	}
}

// TestValidatorDoesNotAllocate: neither the hot path nor a huge declared
// header may allocate.
func TestValidatorDoesNotAllocate(t *testing.T) {
	stream := throttleStream(100)
	huge := []byte("*1048576\r\n$536870912\r\n")
	v, err := NewValidator(DefaultLimits(), true)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, s := range [][]byte{stream, huge} {
			v.Reset()
			for len(s) > 0 {
				n, ev, err := v.Next(s)
				if err != nil {
					t.Fatal(err)
				}
				if ev == EventHeader {
					_ = v.Header()
				}
				s = s[n:]
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}
