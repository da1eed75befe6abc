package guard

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scriptConn is a net.Conn whose Reads return the scripted chunks in turn
// (each possibly over several Reads when p is small), then end with err.
type scriptConn struct {
	chunks      [][]byte
	err         error
	written     bytes.Buffer
	closed      bool
	closedWrite bool
}

func (s *scriptConn) Read(p []byte) (int, error) {
	if len(s.chunks) == 0 {
		if s.err == nil {
			return 0, io.EOF
		}
		return 0, s.err
	}
	n := copy(p, s.chunks[0])
	if s.chunks[0] = s.chunks[0][n:]; len(s.chunks[0]) == 0 {
		s.chunks = s.chunks[1:]
	}
	return n, nil
}

func (s *scriptConn) Write(p []byte) (int, error)      { return s.written.Write(p) }
func (s *scriptConn) Close() error                     { s.closed = true; return nil }
func (s *scriptConn) CloseWrite() error                { s.closedWrite = true; return nil }
func (s *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (s *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (s *scriptConn) SetDeadline(time.Time) error      { return nil }
func (s *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (s *scriptConn) SetWriteDeadline(time.Time) error { return nil }

func newScripted(t *testing.T, authed bool, chunks ...string) (*Conn, *scriptConn) {
	t.Helper()
	sc := &scriptConn{}
	for _, c := range chunks {
		sc.chunks = append(sc.chunks, []byte(c))
	}
	c, err := NewConn(sc, DefaultLimits(), authed)
	if err != nil {
		t.Fatal(err)
	}
	return c, sc
}

// readAll reads c with reads of the given sizes (cycled) until an error,
// returning each read's bytes.
func readAll(t *testing.T, c *Conn, sizes ...int) ([][]byte, error) {
	t.Helper()
	var reads [][]byte
	for i := 0; ; i++ {
		p := make([]byte, sizes[i%len(sizes)])
		n, err := c.Read(p)
		if n < 0 || n > len(p) {
			t.Fatalf("Read returned %d for %d bytes", n, len(p))
		}
		if n > 0 {
			reads = append(reads, p[:n])
		}
		if err != nil {
			return reads, err
		}
		if n == 0 {
			t.Fatal("Read returned 0, nil")
		}
	}
}

// boundaries lists where, in the guard's output for s, requests end.
func boundaries(t *testing.T, s []byte) []int {
	t.Helper()
	v, err := NewValidator(DefaultLimits(), true)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	size := 0
	for len(s) > 0 {
		n, ev, err := v.Next(s)
		if err != nil {
			t.Fatal(err)
		}
		switch ev {
		case EventBody, EventBodyEnd:
			size += n
		case EventHeader:
			size += len(v.Header())
		case EventInline:
			size += len(v.AppendInline(nil))
		}
		if v.AtBoundary() {
			out = append(out, size)
		}
		s = s[n:]
	}
	return out
}

func TestConnPassesTheValidatedStreamInWholeRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var stream []byte
	for i := range 400 {
		switch i % 5 {
		case 0:
			stream = append(stream, "*5\r\n$11\r\nCL.THROTTLE\r\n$7\r\nuser123\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n"...)
		case 1:
			stream = append(stream, "PING \"a b\"\r\n"...)
		case 2:
			stream = append(stream, "*0\r\n*1\r\n$3\r\nGET\r\n"...)
		case 3:
			big := strings.Repeat("x", rng.IntN(3*readBufferSize))
			stream = append(stream, "*2\r\n$3\r\nSET\r\n$"+strconv.Itoa(len(big))+"\r\n"+big+"\r\n"...)
		case 4:
			stream = append(stream, "\r\n"...)
		}
	}
	want := transcode(t, DefaultLimits(), true, stream).out
	cuts := boundaries(t, stream)
	for trial := range 50 {
		sc := &scriptConn{chunks: randomChunks(rng, slices.Clone(stream))}
		if trial%2 == 0 { // also large network reads
			sc.chunks = [][]byte{slices.Clone(stream)}
		}
		c, err := NewConn(sc, DefaultLimits(), true)
		if err != nil {
			t.Fatal(err)
		}
		sizes := []int{1 + rng.IntN(100), 4096, 1 + rng.IntN(20000)}
		reads, err := readAll(t, c, sizes...)
		if err != io.EOF {
			t.Fatalf("ended with %v", err)
		}
		if got := bytes.Join(reads, nil); !bytes.Equal(got, want) {
			t.Fatalf("trial %d: the guard handed on %d bytes, want %d", trial, len(got), len(want))
		}
		// Each read ends at a request boundary unless it filled p.
		at := 0
		for i, r := range reads {
			at += len(r)
			full := len(r) == sizes[i%len(sizes)]
			if _, ok := slices.BinarySearch(cuts, at); !ok && !full {
				t.Fatalf("trial %d: read %d (%d bytes of %d) ends inside a request", trial, i, len(r), sizes[i%len(sizes)])
			}
		}
		if c.BytesRead() != uint64(len(stream)) {
			t.Fatalf("BytesRead %d, want %d", c.BytesRead(), len(stream))
		}
	}
}

func TestConnEmptyRequestsAreDropped(t *testing.T) {
	c, _ := newScripted(t, true, "*0\r\n*-1\r\n\r\n  \n*1\r\n$4\r\nPING\r\n")
	reads, err := readAll(t, c, 512)
	if err != io.EOF || len(reads) != 1 || string(reads[0]) != "*1\r\n$4\r\nPING\r\n" {
		t.Fatalf("got %q %v", reads, err)
	}
}

func TestConnInlineBecomesMultibulk(t *testing.T) {
	c, _ := newScripted(t, true, "set k \"a b\"\r\n")
	reads, err := readAll(t, c, 512)
	if err != io.EOF || len(reads) != 1 || string(reads[0]) != "*3\r\n$3\r\nset\r\n$1\r\nk\r\n$3\r\na b\r\n" {
		t.Fatalf("got %q %v", reads, err)
	}
}

func TestConnViolationRepliesAndCloses(t *testing.T) {
	c, sc := newScripted(t, true, "*1\r\n$4\r\nPING\r\n*1\r\nX")
	p := make([]byte, 512)
	// The request before the violation is handed on first.
	if n, err := c.Read(p); err != nil || string(p[:n]) != "*1\r\n$4\r\nPING\r\n" {
		t.Fatalf("first read %q %v", p[:n], err)
	}
	if sc.written.Len() != 0 {
		t.Fatalf("replied before the violation was reached: %q", sc.written.String())
	}
	if n, err := c.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("second read %d %v, want 0 EOF", n, err)
	}
	if got := sc.written.String(); got != "-ERR Protocol error: expected '$', got 'X'\r\n" {
		t.Fatalf("reply %q", got)
	}
	if !sc.closed || !sc.closedWrite {
		t.Fatalf("closed=%v closedWrite=%v", sc.closed, sc.closedWrite)
	}
	if !errors.Is(c.Violation(), ErrExpectedDollar) {
		t.Fatalf("Violation() = %v", c.Violation())
	}
	if n, err := c.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("read after close %d %v", n, err)
	}
}

func TestConnUnauthenticatedHandsOnOneRequestPerRead(t *testing.T) {
	big := strings.Repeat("v", 20000)
	pipeline := "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20000\r\n" + big + "\r\n"

	// The server authenticates the connection after the AUTH: the big
	// request right behind it in the same packet passes.
	c, sc := newScripted(t, false, pipeline)
	p := make([]byte, 64*1024)
	n, err := c.Read(p)
	if err != nil || string(p[:n]) != "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n" {
		t.Fatalf("first read %q %v", p[:n], err)
	}
	c.SetAuthenticated(true)
	reads, err := readAll(t, c, 64*1024)
	if err != io.EOF || len(reads) != 1 || !strings.HasSuffix(string(reads[0]), big+"\r\n") || sc.written.Len() != 0 {
		t.Fatalf("after AUTH: %d reads, %v, reply %q", len(reads), err, sc.written.String())
	}

	// Without authentication the same bulk is refused.
	c, sc = newScripted(t, false, pipeline)
	if n, err := c.Read(p); err != nil || n == 0 {
		t.Fatalf("first read %d %v", n, err)
	}
	if n, err := c.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("second read %d %v", n, err)
	}
	if got := sc.written.String(); got != "-ERR Protocol error: unauthenticated bulk length\r\n" {
		t.Fatalf("reply %q", got)
	}
}

func TestConnHandsOnWhatPrecedesAReadError(t *testing.T) {
	boom := errors.New("boom")
	c, _ := newScripted(t, true, "PING\r\n", "*1\r\n$4\r\nPI")
	c.Conn.(*scriptConn).err = boom
	reads, err := readAll(t, c, 512)
	if !errors.Is(err, boom) {
		t.Fatalf("ended with %v", err)
	}
	if got := string(bytes.Join(reads, nil)); got != "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI" {
		t.Fatalf("got %q", got)
	}
}

// stuckConn returns nothing, forever.
type stuckConn struct{ scriptConn }

func (s *stuckConn) Read([]byte) (int, error) { return 0, nil }

func TestConnGivesUpOnEmptyReads(t *testing.T) {
	c, err := NewConn(&stuckConn{}, DefaultLimits(), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 16)); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("got %v", err)
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := smallLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Limits){
		func(l *Limits) { l.MaxArgs = 0 },
		func(l *Limits) { l.MaxArgs = MaxArgsCeiling + 1 },
		func(l *Limits) { l.MaxBulkLen = 0 },
		func(l *Limits) { l.MaxBulkLen = MaxBulkLenCeiling + 1 },
		func(l *Limits) { l.MaxInlineLen = MinMaxInlineLen - 1 },
		func(l *Limits) { l.MaxInlineLen = MaxInlineLenCeiling + 1 },
		func(l *Limits) { l.UnauthMaxArgs = 2 },
		func(l *Limits) { l.UnauthMaxArgs = l.MaxArgs + 1 },
		func(l *Limits) { l.UnauthMaxBulkLen = 0 },
		func(l *Limits) { l.UnauthMaxBulkLen = l.MaxBulkLen + 1 },
	}
	for i, mutate := range bad {
		l := DefaultLimits()
		mutate(&l)
		if err := l.Validate(); !errors.Is(err, ErrInvalidLimits) {
			t.Errorf("case %d: %+v validated (%v)", i, l, err)
		}
		if _, err := NewListener(nil, l, false); !errors.Is(err, ErrInvalidLimits) {
			t.Errorf("case %d: NewListener accepted it", i)
		}
	}
}
