package guard

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// chunkReader hands out its chunks one Read at a time, then io.EOF.
type chunkReader struct{ chunks [][]byte }

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	if r.chunks[0] = r.chunks[0][n:]; len(r.chunks[0]) == 0 {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

// frame reads chunks through a fresh Framer and returns the requests it
// handed over, the violation, and whether the stream ended between
// requests.
func frame(t testing.TB, l Limits, authed bool, chunks ...[]byte) (reqs [][]string, err error, atBoundary bool) {
	t.Helper()
	f, ferr := NewFramer(l, authed)
	if ferr != nil {
		t.Fatal(ferr)
	}
	rd := &chunkReader{chunks: chunks}
	for {
		if _, rerr := f.Fill(rd); rerr == io.EOF {
			return reqs, nil, f.v.AtBoundary()
		}
		for {
			args, err := f.Next()
			if err != nil {
				return reqs, err, false
			}
			if args == nil {
				break
			}
			req := make([]string, len(args))
			for i, a := range args {
				req[i] = string(a)
			}
			reqs = append(reqs, req)
		}
	}
}

func TestFramerStreams(t *testing.T) {
	for _, c := range streamCases {
		t.Run(c.name, func(t *testing.T) {
			s := []byte(c.stream)
			for _, chunks := range splits(s)[:2] { // whole, and byte by byte
				reqs, err, boundary := frame(t, c.limitsOrDefault(), !c.unauth, chunks...)
				if !equalReqs(reqs, c.reqs) || !errors.Is(err, c.err) || c.err == nil && err != nil || boundary != c.complete {
					t.Fatalf("%d chunks: %q %v boundary=%v; want %q %v complete=%v",
						len(chunks), reqs, err, boundary, c.reqs, c.err, c.complete)
				}
			}
		})
	}
}

// TestFramerAgainstReference compares the Framer, reading random chunks,
// with the whole-stream reference on seeded random streams.
func TestFramerAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	limits := []Limits{DefaultLimits(), smallLimits()}
	for i := range 20000 {
		s := randomStream(rng)
		l := limits[i%2]
		authed := rng.IntN(3) != 0
		reqs, err, boundary := frame(t, l, authed, randomChunks(rng, s)...)
		ref := refParse(s, l, authed)
		if !equalReqs(reqs, ref.reqs) || errText(err) != errText(ref.err) || (err == nil && boundary) != ref.complete {
			t.Fatalf("stream %q (limits %d, authed %v):\nframer    %q %v boundary=%v\nreference %q %v complete=%v",
				s, i%2, authed, reqs, err, boundary, ref.reqs, ref.err, ref.complete)
		}
	}
}

// A bulk far larger than the read buffer arrives in small reads: the
// buffer grows to hold it, hands it over whole, and shrinks back after.
func TestFramerLargeBulk(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789"), 100_000)
	stream := []byte("*2\r\n$4\r\nECHO\r\n$1000000\r\n" + string(payload) + "\r\n*1\r\n$4\r\nPING\r\n")
	var chunks [][]byte
	for s := stream; len(s) > 0; {
		n := min(len(s), 1000)
		chunks = append(chunks, s[:n])
		s = s[n:]
	}
	f, _ := NewFramer(DefaultLimits(), true)
	rd := &chunkReader{chunks: chunks}
	var got [][]string
	for len(got) < 2 {
		if _, err := f.Fill(rd); err != nil {
			t.Fatalf("after %d requests: %v", len(got), err)
		}
		for args, err := f.Next(); args != nil || err != nil; args, err = f.Next() {
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 && !bytes.Equal(args[1], payload) {
				t.Fatalf("bulk of %d bytes handed over as %d bytes", len(payload), len(args[1]))
			}
			got = append(got, []string{string(args[0])})
		}
	}
	if got[0][0] != "ECHO" || got[1][0] != "PING" {
		t.Fatalf("requests %q", got)
	}
	f.Fill(&chunkReader{chunks: [][]byte{[]byte("PING\r\n")}})
	if cap(f.buf) > framerKeepCap {
		t.Fatalf("read buffer still %d bytes after the large request", cap(f.buf))
	}
}

// After SetAuthenticated(true) between two requests of one read, the
// second gets the full limits.
func TestFramerAuthSwitch(t *testing.T) {
	big := "*2\r\n$4\r\nECHO\r\n$20000\r\n" + strings.Repeat("x", 20000) + "\r\n"
	f, _ := NewFramer(DefaultLimits(), false)
	// The first read brings AUTH and the start of ECHO.
	rd := &chunkReader{chunks: [][]byte{[]byte("AUTH pw\r\n" + big[:1000]), []byte(big[1000:])}}
	f.Fill(rd)
	args, err := f.Next()
	if err != nil || string(args[0]) != "AUTH" {
		t.Fatalf("AUTH: %q %v", args, err)
	}
	f.SetAuthenticated(true)
	for args, err = f.Next(); args == nil; args, err = f.Next() {
		if err != nil {
			t.Fatalf("big ECHO after AUTH: %v", err)
		}
		if _, err := f.Fill(rd); err != nil {
			t.Fatalf("big ECHO after AUTH not handed over: %v", err)
		}
	}
	if len(args[1]) != 20000 {
		t.Fatalf("ECHO argument of %d bytes", len(args[1]))
	}
	f2, _ := NewFramer(DefaultLimits(), false)
	f2.Fill(&chunkReader{chunks: [][]byte{[]byte("AUTH pw\r\n" + big)}})
	f2.Next()
	if _, err := f2.Next(); err != ErrUnauthBulkLength {
		t.Fatalf("big ECHO without AUTH: %v", err)
	}
}

// loopReader serves its stream over and over.
type loopReader struct {
	stream []byte
	at     int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := copy(p, r.stream[r.at:])
	r.at = (r.at + n) % len(r.stream)
	return n, nil
}

// TestFramerDoesNotAllocate: in steady state, reading and framing
// pipelined requests allocates nothing.
func TestFramerDoesNotAllocate(t *testing.T) {
	rd := &loopReader{stream: throttleStream(1000)}
	f, _ := NewFramer(DefaultLimits(), true)
	step := func() {
		f.Fill(rd)
		for args, _ := f.Next(); args != nil; args, _ = f.Next() {
		}
	}
	for range 100 {
		step()
	}
	if allocs := testing.AllocsPerRun(1000, step); allocs != 0 {
		t.Fatalf("%v allocations per read", allocs)
	}
}

// BenchmarkFramer measures the whole read path: reads into the buffer,
// validation and the argument slices, per byte of pipelined CL.THROTTLE.
func BenchmarkFramer(b *testing.B) {
	rd := &loopReader{stream: throttleStream(1000)}
	f, _ := NewFramer(DefaultLimits(), true)
	b.SetBytes(int64(len(rd.stream)))
	b.ReportAllocs()
	for b.Loop() {
		for reqs := 0; reqs < 1000; {
			f.Fill(rd)
			for args, _ := f.Next(); args != nil; args, _ = f.Next() {
				reqs++
			}
		}
	}
}
