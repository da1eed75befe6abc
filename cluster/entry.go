package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A raft log entry carries a batch: the commands of many connections (whole
// pipelines) that the leader appended at once, and the stamp they apply
// at. Its encoding:
//
//	version   1 byte (BatchVersion)
//	stamp     8 bytes, little-endian int64 (Unix ns, from LeaderClock)
//	commands  uvarint count, then per command:
//	          uvarint argument count, then per argument: uvarint length | bytes
//
// A batch of no commands is valid: an idle tick that only moves time.
// Varints must be minimal, so one batch has exactly one encoding.

// BatchVersion is the entry format this binary writes and reads.
const BatchVersion = 1

const batchHeader = 1 + 8

// ErrCorruptBatch: an entry that is not a well-formed batch. A state
// machine must stop rather than skip it: the other replicas applied it.
var ErrCorruptBatch = errors.New("cluster: corrupt batch entry")

// AppendBatch appends the entry for cmds (each a command's arguments, the
// name first) stamped at stamp.
func AppendBatch(dst []byte, stamp int64, cmds [][][]byte) []byte {
	size := batchHeader + binary.MaxVarintLen64
	for _, args := range cmds {
		size += binary.MaxVarintLen64
		for _, a := range args {
			size += binary.MaxVarintLen64 + len(a)
		}
	}
	if cap(dst)-len(dst) < size {
		dst = append(make([]byte, 0, len(dst)+size), dst...)
	}
	dst = append(dst, BatchVersion)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(stamp))
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	for _, args := range cmds {
		dst = binary.AppendUvarint(dst, uint64(len(args)))
		for _, a := range args {
			dst = binary.AppendUvarint(dst, uint64(len(a)))
			dst = append(dst, a...)
		}
	}
	return dst
}

// BatchDecoder decodes batch entries without allocating: it keeps one
// argument slice and reuses it for every command. One per state machine;
// not safe for concurrent use.
type BatchDecoder struct {
	args [][]byte
}

// Decode checks the whole entry, then calls fn for each command in order.
// A corrupt entry is an error wrapping ErrCorruptBatch and fn is never
// called, so a state machine does not apply half a batch. args and the
// byte slices in it alias entry and are valid only during the call.
func (d *BatchDecoder) Decode(entry []byte, fn func(args [][]byte)) (stamp int64, commands int, err error) {
	b, err := d.Check(entry)
	if err != nil {
		return 0, 0, err
	}
	d.Walk(b, fn)
	return b.Stamp, b.n, nil
}

// CheckedBatch is an entry Check found well-formed.
type CheckedBatch struct {
	// Stamp is the instant the entry applies at.
	Stamp int64
	body  []byte
	n     int
}

// Check checks the whole entry without calling anything, so a state
// machine can reject a corrupt entry before it changes anything (its
// clock included).
func (d *BatchDecoder) Check(entry []byte) (CheckedBatch, error) {
	stamp, n, body, err := batchHead(entry)
	if err != nil {
		return CheckedBatch{}, err
	}
	if err := d.walk(body, n, nil); err != nil {
		return CheckedBatch{}, err
	}
	return CheckedBatch{Stamp: stamp, body: body, n: int(n)}, nil
}

// Walk calls fn for each command of an entry Check passed, in order.
func (d *BatchDecoder) Walk(b CheckedBatch, fn func(args [][]byte)) {
	_ = d.walk(b.body, uint64(b.n), fn) // checked by Check
}

// BatchStamp returns an entry's stamp (and checks its header), for a reader
// that needs the time without the commands.
func BatchStamp(entry []byte) (int64, error) {
	stamp, _, _, err := batchHead(entry)
	return stamp, err
}

// batchHead reads the version, stamp and command count.
func batchHead(entry []byte) (stamp int64, n uint64, body []byte, err error) {
	if len(entry) < batchHeader {
		return 0, 0, nil, fmt.Errorf("%w: %d bytes, shorter than the header", ErrCorruptBatch, len(entry))
	}
	if entry[0] != BatchVersion {
		return 0, 0, nil, fmt.Errorf("%w: version %d, want %d", ErrCorruptBatch, entry[0], BatchVersion)
	}
	stamp = int64(binary.LittleEndian.Uint64(entry[1:batchHeader]))
	n, k := minimalUvarint(entry[batchHeader:])
	if k <= 0 {
		return 0, 0, nil, fmt.Errorf("%w: bad command count", ErrCorruptBatch)
	}
	body = entry[batchHeader+k:]
	// Every command takes at least one byte, so a count above the bytes
	// left is corrupt (and cannot make the walk loop for long).
	if n > uint64(len(body)) {
		return 0, 0, nil, fmt.Errorf("%w: %d commands in %d bytes", ErrCorruptBatch, n, len(body))
	}
	return stamp, n, body, nil
}

// walk reads n commands off b, calling fn (when not nil) with each.
func (d *BatchDecoder) walk(b []byte, n uint64, fn func(args [][]byte)) error {
	for i := range n {
		argc, k := minimalUvarint(b)
		if k <= 0 || argc > uint64(len(b)-k) {
			return fmt.Errorf("%w: command %d: bad argument count", ErrCorruptBatch, i)
		}
		b = b[k:]
		args := d.args[:0]
		for j := range argc {
			l, k := minimalUvarint(b)
			if k <= 0 || l > uint64(len(b)-k) {
				return fmt.Errorf("%w: command %d, argument %d: bad length", ErrCorruptBatch, i, j)
			}
			if fn != nil {
				args = append(args, b[k:k+int(l):k+int(l)])
			}
			b = b[k+int(l):]
		}
		if fn != nil {
			d.args = args
			fn(args)
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d bytes after the last command", ErrCorruptBatch, len(b))
	}
	return nil
}

// minimalUvarint is binary.Uvarint that also refuses a longer spelling of
// a value (a last byte of zero), so an encoding is unique.
func minimalUvarint(b []byte) (uint64, int) {
	v, k := binary.Uvarint(b)
	if k > 1 && b[k-1] == 0 {
		return 0, 0
	}
	return v, k
}
