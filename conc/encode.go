package conc

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// AppendBinary appends the snapshot encoding of l to dst: the lease count
// (uvarint), then per lease in stored (expiry, id) order its expiry — the
// first as a zigzag varint, each later one as the uvarint gap from the one
// before, which is small for leases taken close together — followed by the
// id length (uvarint) and the id bytes. Leases that have expired but not yet
// been pruned are kept: the encoding does not depend on any clock.
func (l *Leases) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(l.Len()))
	prev := int64(0)
	for i, x := range l.all() {
		if i == 0 {
			dst = binary.AppendVarint(dst, x.expiry)
		} else {
			dst = binary.AppendUvarint(dst, uint64(x.expiry)-uint64(prev))
		}
		prev = x.expiry
		dst = binary.AppendUvarint(dst, uint64(len(x.id)))
		dst = append(dst, x.id...)
	}
	return dst
}

// DecodeLeases is the inverse of AppendBinary. It rejects, with an error
// wrapping ErrCorrupt and never a panic, anything AppendBinary cannot have
// produced: truncation, trailing bytes, more than MaxLimit leases, ids over
// MaxRequestIDLen, leases out of order, a repeated id, or an expiry past
// int64.
func DecodeLeases(b []byte) (Leases, error) {
	var l Leases
	if err := l.decode(b, false); err != nil {
		return Leases{}, err
	}
	return l, nil
}

// DecodeBorrowed decodes b into l as DecodeLeases does, reusing l's
// storage, with the request ids pointing into b rather than copied: it
// allocates nothing. l is valid only while b is unchanged — a caller
// decodes a record, changes the leases, appends their encoding elsewhere
// and only then overwrites the record; one that keeps l longer must decode
// a copy with DecodeLeases instead.
func (l *Leases) DecodeBorrowed(b []byte) error {
	if err := l.decode(b, true); err != nil {
		*l = Leases{}
		return err
	}
	return nil
}

// Reset empties l, keeping its storage for the next decode.
func (l *Leases) Reset() {
	clear(l.buf)
	l.buf, l.head, l.index = l.buf[:0], 0, nil
}

// decode replaces l's leases with b's, ids copied or borrowed from b.
func (l *Leases) decode(b []byte, borrow bool) error {
	l.Reset()
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return fmt.Errorf("%w: bad lease count", ErrCorrupt)
	}
	b = b[k:]
	// Each lease takes at least two bytes (expiry, id length), so a count
	// the input cannot hold is rejected before allocating for it.
	if n > MaxLimit || n > uint64(len(b)/2) {
		return fmt.Errorf("%w: lease count %d", ErrCorrupt, n)
	}
	if n > uint64(cap(l.buf)) {
		l.buf = make([]lease, 0, n)
	}
	for i := range int(n) {
		var expiry int64
		if i == 0 {
			v, k := binary.Varint(b)
			if k <= 0 {
				return fmt.Errorf("%w: bad expiry", ErrCorrupt)
			}
			expiry, b = v, b[k:]
		} else {
			gap, k := binary.Uvarint(b)
			if k <= 0 {
				return fmt.Errorf("%w: bad expiry gap", ErrCorrupt)
			}
			prev := l.buf[i-1].expiry
			// uint64 arithmetic gives the exact headroom even for a
			// negative prev.
			if gap > uint64(math.MaxInt64)-uint64(prev) {
				return fmt.Errorf("%w: expiry overflows", ErrCorrupt)
			}
			expiry, b = int64(uint64(prev)+gap), b[k:]
		}
		size, k := binary.Uvarint(b)
		if k <= 0 {
			return fmt.Errorf("%w: bad id length", ErrCorrupt)
		}
		b = b[k:]
		if size > MaxRequestIDLen || size > uint64(len(b)) {
			return fmt.Errorf("%w: id length %d", ErrCorrupt, size)
		}
		raw := b[:size]
		id := ""
		switch {
		case borrow && size > 0:
			id = unsafe.String(&raw[0], len(raw))
		default:
			id = string(raw)
		}
		x := lease{expiry: expiry, fp: fingerprint(raw), id: id}
		b = b[size:]
		if i > 0 && compareLease(l.buf[i-1], x) >= 0 {
			return fmt.Errorf("%w: leases out of order", ErrCorrupt)
		}
		l.buf = append(l.buf, x)
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(b))
	}
	if hasDuplicateID(l.buf) {
		return fmt.Errorf("%w: repeated request id", ErrCorrupt)
	}
	if len(l.buf) >= indexOn {
		l.buildIndex()
	}
	return nil
}

// hasDuplicateID reports whether two leases share an id. Order is by expiry
// first, so equal ids need not be adjacent.
func hasDuplicateID(leases []lease) bool {
	if len(leases) < indexOn {
		for i := range leases {
			for j := i + 1; j < len(leases); j++ {
				if leases[i].id == leases[j].id {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[string]struct{}, len(leases))
	for _, x := range leases {
		if _, ok := seen[x.id]; ok {
			return true
		}
		seen[x.id] = struct{}{}
	}
	return false
}
