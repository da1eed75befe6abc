package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A raft log entry carries a batch: the commands of many connections (whole
// pipelines) that the leader appended at once, the stamp they apply at,
// and who proposed it. Its encoding:
//
//	version   1 byte (BatchVersion, or 1: the same without the proposal)
//	stamp     8 bytes, little-endian int64 (Unix ns, from LeaderClock)
//	proposal  (version 2) proposer 8 bytes, little-endian uint64 (random per
//	          process; 0: none), then uvarint seq (the proposer's counter)
//	commands  uvarint count, then per command:
//	          uvarint argument count, then per argument: uvarint length | bytes
//
// A batch of no commands is valid: an idle tick that only moves time.
// Varints must be minimal, so one batch has exactly one encoding. The
// proposal lets the node that logged an entry hand its replies to the
// clients waiting for it whenever it applies — also after that node lost
// the lead and another committed the entry — and know for certain that an
// entry of its own did not apply when another took its index.

// BatchVersion is the entry format this binary writes; it reads version 1
// too (logs written before proposals).
const BatchVersion = 2

// batchHeader is version 1's header: version and stamp.
const batchHeader = 1 + 8

// Proposal names an entry among those its proposer logged.
type Proposal struct {
	// Proposer is the proposing process's id (0: no proposal).
	Proposer uint64
	// Seq counts the proposer's entries.
	Seq uint64
}

// ErrCorruptBatch: an entry that is not a well-formed batch. A state
// machine must stop rather than skip it: the other replicas applied it.
var ErrCorruptBatch = errors.New("cluster: corrupt batch entry")

// AppendBatch appends a version 1 entry for cmds (each a command's
// arguments, the name first) stamped at stamp, without a proposal.
func AppendBatch(dst []byte, stamp int64, cmds [][][]byte) []byte {
	return appendBatch(dst, 1, Proposal{}, stamp, cmds)
}

// AppendProposal appends the entry for cmds stamped at stamp, proposed as
// p.
func AppendProposal(dst []byte, p Proposal, stamp int64, cmds [][][]byte) []byte {
	return appendBatch(dst, BatchVersion, p, stamp, cmds)
}

func appendBatch(dst []byte, version byte, p Proposal, stamp int64, cmds [][][]byte) []byte {
	size := batchHeader + 8 + 2*binary.MaxVarintLen64
	for _, args := range cmds {
		size += binary.MaxVarintLen64
		for _, a := range args {
			size += binary.MaxVarintLen64 + len(a)
		}
	}
	if cap(dst)-len(dst) < size {
		dst = append(make([]byte, 0, len(dst)+size), dst...)
	}
	dst = append(dst, version)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(stamp))
	if version >= 2 {
		dst = binary.LittleEndian.AppendUint64(dst, p.Proposer)
		dst = binary.AppendUvarint(dst, p.Seq)
	}
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
	// Proposal is who proposed it (zero for version 1 entries).
	Proposal Proposal
	body     []byte
	n        int
}

// Len is how many commands the entry holds.
func (b CheckedBatch) Len() int { return b.n }

// Check checks the whole entry without calling anything, so a state
// machine can reject a corrupt entry before it changes anything (its
// clock included).
func (d *BatchDecoder) Check(entry []byte) (CheckedBatch, error) {
	h, err := batchHead(entry)
	if err != nil {
		return CheckedBatch{}, err
	}
	if err := d.walk(h.body, h.n, nil); err != nil {
		return CheckedBatch{}, err
	}
	return CheckedBatch{Stamp: h.stamp, Proposal: h.proposal, body: h.body, n: int(h.n)}, nil
}

// Walk calls fn for each command of an entry Check passed, in order.
func (d *BatchDecoder) Walk(b CheckedBatch, fn func(args [][]byte)) {
	_ = d.walk(b.body, uint64(b.n), fn) // checked by Check
}

// BatchStamp returns an entry's stamp (and checks its header), for a reader
// that needs the time without the commands.
func BatchStamp(entry []byte) (int64, error) {
	h, err := batchHead(entry)
	return h.stamp, err
}

// head is an entry's header as batchHead read it.
type head struct {
	stamp    int64
	proposal Proposal
	n        uint64
	body     []byte
}

// batchHead reads the version, stamp, proposal and command count.
func batchHead(entry []byte) (head, error) {
	var h head
	if len(entry) < batchHeader {
		return h, fmt.Errorf("%w: %d bytes, shorter than the header", ErrCorruptBatch, len(entry))
	}
	version := entry[0]
	if version != 1 && version != BatchVersion {
		return h, fmt.Errorf("%w: version %d, want 1 or %d", ErrCorruptBatch, entry[0], BatchVersion)
	}
	h.stamp = int64(binary.LittleEndian.Uint64(entry[1:batchHeader]))
	rest := entry[batchHeader:]
	if version >= 2 {
		if len(rest) < 8 {
			return h, fmt.Errorf("%w: no proposer", ErrCorruptBatch)
		}
		h.proposal.Proposer = binary.LittleEndian.Uint64(rest)
		seq, k := minimalUvarint(rest[8:])
		if k <= 0 {
			return h, fmt.Errorf("%w: bad proposal sequence", ErrCorruptBatch)
		}
		h.proposal.Seq = seq
		rest = rest[8+k:]
	}
	n, k := minimalUvarint(rest)
	if k <= 0 {
		return h, fmt.Errorf("%w: bad command count", ErrCorruptBatch)
	}
	h.body = rest[k:]
	// Every command takes at least one byte, so a count above the bytes
	// left is corrupt (and cannot make the walk loop for long).
	if n > uint64(len(h.body)) {
		return h, fmt.Errorf("%w: %d commands in %d bytes", ErrCorruptBatch, n, len(h.body))
	}
	h.n = n
	return h, nil
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
