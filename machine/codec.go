package machine

import (
	"encoding/binary"
	"math"
)

// byteReader reads the records' encodings (policy, ownership, groups,
// reservations), remembering the first fault.
type byteReader struct {
	b   []byte
	bad bool
}

// uvarint reads an unsigned varint of at most max.
func (d *byteReader) uvarint(max int) int {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > uint64(max) {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

// uvarint64 reads an unsigned varint of any size.
func (d *byteReader) uvarint64() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint reads a signed varint.
func (d *byteReader) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes reads a length-prefixed run of bytes (a slice of the input).
func (d *byteReader) bytes() []byte {
	n := d.uvarint(math.MaxInt32)
	if d.bad || n > len(d.b) {
		d.bad = true
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}
