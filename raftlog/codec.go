package raftlog

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// A log entry is stored under logKey(index) as
//
//	version (1 byte, recordVersion)
//	index    uvarint   (repeats the key: a record under the wrong key is corrupt)
//	term     uvarint
//	type     1 byte    (raft.LogType)
//	flags    1 byte    (flagAppendedAt: the two fields below are present)
//	[appendedAt seconds varint, nanoseconds uvarint < 1e9]
//	data       uvarint length | bytes
//	extensions uvarint length | bytes
//
// A 1 KB command costs about 15 bytes of framing. AppendedAt is kept as
// seconds and nanoseconds so every time.Time survives (UnixNano overflows
// outside 1678–2262); the zero time, which raft leaves on entries it did not
// stamp, stays zero.
const (
	recordVersion  = 1
	flagAppendedAt = 1 << 0
	knownFlags     = flagAppendedAt
)

// appendRecord appends the encoding of l.
func appendRecord(dst []byte, l *raft.Log) []byte {
	dst = append(dst, recordVersion)
	dst = binary.AppendUvarint(dst, l.Index)
	dst = binary.AppendUvarint(dst, l.Term)
	dst = append(dst, byte(l.Type))
	if l.AppendedAt.IsZero() {
		dst = append(dst, 0)
	} else {
		dst = append(dst, flagAppendedAt)
		dst = binary.AppendVarint(dst, l.AppendedAt.Unix())
		dst = binary.AppendUvarint(dst, uint64(l.AppendedAt.Nanosecond()))
	}
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	return append(dst, l.Extensions...)
}

// decodeRecord fills l from b. l.Data and l.Extensions alias b, so b must
// be a copy the caller owns. Any malformed input is an error wrapping
// ErrCorrupt.
func decodeRecord(b []byte, l *raft.Log) error {
	d := decoder{b: b}
	if v := d.byte(); v != recordVersion {
		if d.err != nil {
			return d.err
		}
		return fmt.Errorf("%w: log record version %d", ErrCorrupt, v)
	}
	index := d.uvarint()
	term := d.uvarint()
	typ := d.byte()
	flags := d.byte()
	var at time.Time
	if flags&flagAppendedAt != 0 {
		sec := d.varint()
		nsec := d.uvarint()
		if d.err == nil && nsec >= 1e9 {
			return fmt.Errorf("%w: log record nanoseconds %d", ErrCorrupt, nsec)
		}
		at = time.Unix(sec, int64(nsec))
	}
	data := d.bytes()
	ext := d.bytes()
	switch {
	case d.err != nil:
		return d.err
	case flags&^knownFlags != 0:
		return fmt.Errorf("%w: log record flags %#x", ErrCorrupt, flags)
	case len(d.b) != 0:
		return fmt.Errorf("%w: %d bytes after the log record", ErrCorrupt, len(d.b))
	}
	*l = raft.Log{Index: index, Term: term, Type: raft.LogType(typ), Data: data, Extensions: ext, AppendedAt: at}
	return nil
}

// decoder reads fields off b; the first malformed field sets err and every
// later read returns zero.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: log record truncated in %s", ErrCorrupt, what)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("a byte field")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("an unsigned varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("a varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes reads a length-prefixed field; an empty field is nil. The result's
// capacity ends at its length, so appending to it never overwrites the
// next field.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("a length-prefixed field")
		return nil
	}
	if n == 0 {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
