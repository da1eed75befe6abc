package room

import (
	"encoding/binary"
	"math"
)

// Reader reads the records' encodings (policy, ownership, groups,
// reservations), remembering the first fault.
type Reader struct {
	B   []byte
	Bad bool
}

// Uvarint reads an unsigned varint of at most max.
func (d *Reader) Uvarint(max int) int {
	v, n := binary.Uvarint(d.B)
	if n <= 0 || v > uint64(max) {
		d.Bad = true
		return 0
	}
	d.B = d.B[n:]
	return int(v)
}

// Uvarint64 reads an unsigned varint of any size.
func (d *Reader) Uvarint64() uint64 {
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Bad = true
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Varint reads a signed Varint.
func (d *Reader) Varint() int64 {
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Bad = true
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Bytes reads a length-prefixed run of Bytes (a slice of the input).
func (d *Reader) Bytes() []byte {
	n := d.Uvarint(math.MaxInt32)
	if d.Bad || n > len(d.B) {
		d.Bad = true
		return nil
	}
	out := d.B[:n]
	d.B = d.B[n:]
	return out
}
