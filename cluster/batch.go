package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A log entry is a batch of commands from any number of connections,
// stamped with the leader's instant:
//
//	version  1 byte   1
//	stamp    varint   Unix ns: the instant every command of the batch applies at
//	count    uvarint  commands (0: an idle tick that only moves time)
//	each command: nargs uvarint, then each argument: length uvarint, bytes
//
// Lengths are checked against what remains before anything is read, so a
// corrupt entry is an error, never a panic or a huge allocation.
const batchVersion = 1

// ErrCorruptBatch: a log entry that does not decode.
var ErrCorruptBatch = errors.New("cluster: corrupt log entry")

// AppendBatch appends the entry for cmds at stamp to dst.
func AppendBatch(dst []byte, stamp int64, cmds [][][]byte) []byte {
	dst = append(dst, batchVersion)
	dst = binary.AppendVarint(dst, stamp)
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

// DecodeBatch checks the whole entry, then calls tick with its stamp and
// cmd with each command in order (args reuse one slice and point into b:
// valid only during the call). It returns the stamp. A corrupt entry calls
// nothing.
func DecodeBatch(b []byte, cmd func(stamp int64, args [][]byte), tick func(stamp int64)) (int64, error) {
	stamp, maxArgs, err := walkBatch(b, nil)
	if err != nil {
		return 0, err
	}
	tick(stamp)
	args := make([][]byte, 0, maxArgs)
	_, _, err = walkBatch(b, func(a [][]byte) { cmd(stamp, a) }, args...)
	return stamp, err
}

// walkBatch reads the entry; with fn set it calls fn with each command.
// It reports the stamp and the largest argument count.
func walkBatch(b []byte, fn func(args [][]byte), scratch ...[]byte) (stamp int64, maxArgs int, err error) {
	corrupt := func(what string) (int64, int, error) {
		return 0, 0, fmt.Errorf("%w: %s", ErrCorruptBatch, what)
	}
	if len(b) == 0 || b[0] != batchVersion {
		return corrupt("unknown version")
	}
	b = b[1:]
	stamp, n := binary.Varint(b)
	if n <= 0 {
		return corrupt("stamp")
	}
	b = b[n:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return corrupt("command count")
	}
	b = b[n:]
	args := scratch[:0]
	for range count {
		nargs, n := binary.Uvarint(b)
		if n <= 0 || nargs == 0 || nargs > uint64(len(b)) {
			return corrupt("argument count")
		}
		b = b[n:]
		maxArgs = max(maxArgs, int(nargs))
		args = args[:0]
		for range nargs {
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return corrupt("argument length")
			}
			args = append(args, b[n:n+int(l)])
			b = b[n+int(l):]
		}
		if fn != nil {
			fn(args)
		}
	}
	if len(b) != 0 {
		return corrupt("trailing bytes")
	}
	return stamp, maxArgs, nil
}
