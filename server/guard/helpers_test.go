package guard

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/tidwall/redcon"
)

// verdict is what feeding a stream to a Validator produced: the bytes to hand
// on (whole requests re-encoded as multibulk; after an error only the
// requests finished before it), the error, and whether the stream ended
// between requests.
type verdict struct {
	out        []byte
	err        error
	atBoundary bool
}

func (a verdict) equal(b verdict) bool {
	return bytes.Equal(a.out, b.out) && errText(a.err) == errText(b.err) && a.atBoundary == b.atBoundary
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// transcode feeds chunks to a fresh Validator in order.
func transcode(t testing.TB, l Limits, authed bool, chunks ...[]byte) verdict {
	t.Helper()
	v, err := NewValidator(l, authed)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	finished := 0 // len(out) at the last request boundary
	for _, chunk := range chunks {
		for len(chunk) > 0 {
			n, ev, err := v.Next(chunk)
			if err != nil {
				return verdict{out: out[:finished], err: err}
			}
			if n == 0 {
				t.Fatalf("Next made no progress on %q", chunk)
			}
			switch ev {
			case EventBody, EventBodyEnd:
				out = append(out, chunk[:n]...)
			case EventHeader:
				out = append(out, v.Header()...)
			case EventInline:
				out = v.AppendInline(out)
			}
			if v.AtBoundary() {
				finished = len(out)
			}
			chunk = chunk[n:]
		}
	}
	return verdict{out: out, atBoundary: v.AtBoundary()}
}

// splits is every way the tests cut a stream: whole, byte by byte, and in
// two at every offset.
func splits(s []byte) [][][]byte {
	out := [][][]byte{{s}}
	ones := make([][]byte, len(s))
	for i := range s {
		ones[i] = s[i : i+1]
	}
	out = append(out, ones)
	for i := 1; i < len(s); i++ {
		out = append(out, [][]byte{s[:i], s[i:]})
	}
	return out
}

// decodeWithRedcon parses what the guard hands on with redcon's own reader,
// the parser the guard protects, and returns the complete requests. Any
// redcon error other than running out of input fails the test: the guard
// must never hand redcon something it rejects.
func decodeWithRedcon(t testing.TB, out []byte) [][]string {
	t.Helper()
	rd := redcon.NewReader(bytes.NewReader(out))
	var reqs [][]string
	for {
		cmd, err := rd.ReadCommand()
		if errors.Is(err, io.EOF) {
			return reqs
		}
		if err != nil {
			t.Fatalf("redcon refused guard output %q: %v", out, err)
		}
		args := make([]string, len(cmd.Args))
		for i, a := range cmd.Args {
			args[i] = string(a)
		}
		reqs = append(reqs, args)
	}
}

func equalReqs(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

// smallLimits keeps the limits low enough to cross in a test.
func smallLimits() Limits {
	return Limits{MaxArgs: 8, MaxBulkLen: 100, MaxInlineLen: 64, UnauthMaxArgs: 3, UnauthMaxBulkLen: 10}
}
