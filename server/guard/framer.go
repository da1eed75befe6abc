package guard

import "io"

const (
	// framerBufferSize is the read buffer a Framer starts with and returns
	// to after a large request (Redis reads 16 KiB at a time).
	framerBufferSize = 16 * 1024
	// framerKeepCap is the largest read buffer kept once the request that
	// needed it is done.
	framerKeepCap = 64 * 1024
	// argsKeepCap is the most argument slices kept between requests.
	argsKeepCap = 1024
)

// Framer turns a connection's byte stream into requests, parsing each byte
// once: the Validator that enforces the limits also records where each
// argument lies, and Next hands the arguments over as slices of the read
// buffer, without copying them.
//
// A Framer reads into one buffer per connection. Bytes of a multibulk
// request still in progress stay in it (it grows to hold the request);
// everything before them is dropped on the next Fill. Inline requests are
// kept by the Validator's splitter, so their raw bytes are never kept.
//
// A Framer is not safe for concurrent use.
type Framer struct {
	v   Validator
	buf []byte
	// buf[r:w] is read but not yet parsed.
	r, w int
	// bufAt is the stream offset of buf[0].
	bufAt int64
	// reqAt is the stream offset where the request in progress began.
	reqAt int64
	args  [][]byte
}

// NewFramer returns a Framer for a new connection. authenticated says
// whether it starts with the full limits or the Unauth ones.
func NewFramer(limits Limits, authenticated bool) (*Framer, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	f := &Framer{}
	f.v.init(limits, authenticated)
	return f, nil
}

// SetAuthenticated lifts (true) or restores (false) the Unauth limits, from
// the next request on.
func (f *Framer) SetAuthenticated(ok bool) { f.v.SetAuthenticated(ok) }

// Fill reads once from rd into the buffer and returns what Read returned.
// It first drops what Next has handed over, keeping the multibulk request
// in progress, and grows the buffer when that request needs more room.
func (f *Framer) Fill(rd io.Reader) (int, error) {
	f.makeRoom()
	n, err := rd.Read(f.buf[f.w:])
	if n > 0 {
		f.w += n
	}
	return n, err
}

// Size is the read buffer's size: what the connection's requests hold now.
func (f *Framer) Size() int { return cap(f.buf) }

// Buffered reports whether read bytes wait to be parsed.
func (f *Framer) Buffered() bool { return f.r < f.w }

// makeRoom prepares buf[w:] for the next read.
func (f *Framer) makeRoom() {
	keep := f.w // index of the first byte to keep
	if f.inMultibulk() {
		keep = int(f.reqAt - f.bufAt)
	}
	if keep == f.w && cap(f.buf) > framerKeepCap {
		f.buf = nil // the large request is done: do not pin its buffer
	}
	if f.buf == nil {
		f.buf = make([]byte, framerBufferSize)
		f.bufAt += int64(f.w)
		f.r, f.w = 0, 0
		return
	}
	if keep > 0 {
		copy(f.buf, f.buf[keep:f.w])
		f.bufAt += int64(keep)
		f.r -= keep
		f.w -= keep
	}
	if f.w < len(f.buf) {
		return
	}
	// The request in progress fills the buffer: double it, but not past
	// the end of the payload being read. Growing only as bytes arrive
	// keeps a client that declares a huge bulk and sends little from
	// costing more than it sent.
	size := 2 * len(f.buf)
	if f.v.state == stBulkData {
		size = min(size, f.w+int(f.v.dataLeft)+2)
	}
	grown := make([]byte, size)
	copy(grown, f.buf[:f.w])
	f.buf = grown
}

// inMultibulk reports whether a multibulk request is in progress, whose
// bytes the buffer must keep.
func (f *Framer) inMultibulk() bool {
	return f.v.err == nil && f.v.state >= stDollar && f.v.state <= stBulkLF
}

// Next returns the next complete request in the buffer, as slices that stay
// valid until the next call to Next or Fill; nil when the buffer holds no
// complete request (Fill again). Empty requests are skipped, as Redis skips
// them. On a protocol violation it returns the error (one of this package's
// sentinels, possibly wrapped), and keeps returning it.
func (f *Framer) Next() ([][]byte, error) {
	for f.r < f.w || f.v.err != nil {
		if f.v.state == stIdle {
			f.reqAt = f.v.pos
		}
		k, ev, err := f.v.Next(f.buf[f.r:f.w])
		f.r += k
		if err != nil {
			return nil, err
		}
		switch ev {
		case EventBodyEnd:
			return f.multibulkArgs(), nil
		case EventInline:
			return f.inlineArgs(), nil
		}
	}
	return nil, nil
}

func (f *Framer) resetArgs() {
	if cap(f.args) > argsKeepCap {
		f.args = nil
	}
	f.args = f.args[:0]
}

// multibulkArgs slices the finished request's arguments out of the buffer.
func (f *Framer) multibulkArgs() [][]byte {
	f.resetArgs()
	for _, s := range f.v.spans {
		at := int(s.at - f.bufAt)
		f.args = append(f.args, f.buf[at:at+int(s.n):at+int(s.n)])
	}
	return f.args
}

// inlineArgs slices the finished inline request's words out of the
// splitter's buffer.
func (f *Framer) inlineArgs() [][]byte {
	f.resetArgs()
	p := &f.v.inline
	start := int32(0)
	for _, end := range p.ends {
		f.args = append(f.args, p.words[start:end:end])
		start = end
	}
	return f.args
}
