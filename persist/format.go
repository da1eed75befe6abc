package persist

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/sluice-rl/sluice/keyspace"
)

// The snapshot format; doc.go describes it byte by byte. Bump
// SnapshotVersion for any change a reader of the previous version would
// misread, and keep reading the old versions.
const (
	// snapshotMagic opens every snapshot. Like PNG's signature it has a
	// high-bit byte and a line break, so transfers that mangle binary or
	// line endings are caught before the checksum.
	snapshotMagic = "\x89SLUICE\n"
	// SnapshotVersion is the format version this binary writes. Version 2
	// added the applied instant; version 1 files are still read (their
	// applied instant is taken to be Created, the instant their keys were
	// judged live at).
	SnapshotVersion = 2
	// maxKeyLen bounds a record's key, as Redis bounds a bulk string.
	maxKeyLen = 512 << 20
	// maxStateLen bounds a record's encoded state; the largest states
	// (sliding logs, lease sets) are well under a megabyte.
	maxStateLen = 64 << 20
	// endOfRecords is the kind byte that ends the records.
	endOfRecords = byte(keyspace.KindNone)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is what a snapshot says about itself.
type Header struct {
	// Version is the format version the snapshot was written in.
	Version uint64
	// Seq is the change-journal position the snapshot reflects: every
	// journaled change numbered Seq or less had been applied to the keyspace
	// before the first key was read. (A Raft log will store its applied
	// index here.)
	Seq uint64
	// Created is the instant the snapshot was begun, Unix ns, by the server
	// clock: for people and LASTSAVE, never for the state.
	Created int64
	// Applied is the state machine's applied instant the snapshot was taken
	// at: its keys are those live then, and a restore resumes from it.
	Applied int64
}

// Record is one key of a snapshot.
type Record struct {
	Kind keyspace.Kind
	// Key is only valid during the callback that receives it.
	Key []byte
	// Word is the keyspace word: a GCRA key's theoretical arrival time,
	// else the instant the key expires (0 = never).
	Word int64
	// State is the kind's AppendBinary encoding (empty for GCRA); only
	// valid during the callback that receives it.
	State []byte
}

// snapshotWriter streams a snapshot: header, records, trailer. Everything
// written passes through the checksum.
type snapshotWriter struct {
	w       *bufio.Writer
	crc     hash.Hash32
	records uint64
	bytes   int64
}

func newSnapshotWriter(w io.Writer, h Header) (*snapshotWriter, error) {
	sw := &snapshotWriter{crc: crc32.New(castagnoli)}
	sw.w = bufio.NewWriterSize(io.MultiWriter(sw.crc, w), 1<<20)
	b := append([]byte(nil), snapshotMagic...)
	b = binary.AppendUvarint(b, SnapshotVersion)
	b = binary.AppendUvarint(b, h.Seq)
	b = binary.AppendVarint(b, h.Created)
	b = binary.AppendVarint(b, h.Applied)
	return sw, sw.write(b)
}

func (sw *snapshotWriter) write(b []byte) error {
	n, err := sw.w.Write(b)
	sw.bytes += int64(n)
	return err
}

// appendRecord appends one record's encoding to dst.
func appendRecord(dst []byte, kind keyspace.Kind, key []byte, word int64, state []byte) []byte {
	dst = append(dst, byte(kind))
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(word))
	dst = binary.AppendUvarint(dst, uint64(len(state)))
	return append(dst, state...)
}

// writeRecords writes records already encoded by appendRecord.
func (sw *snapshotWriter) writeRecords(b []byte, n int) error {
	sw.records += uint64(n)
	return sw.write(b)
}

// finish writes the trailer and flushes; the checksum covers every byte
// before it.
func (sw *snapshotWriter) finish() error {
	b := binary.AppendUvarint([]byte{endOfRecords}, sw.records)
	if err := sw.write(b); err != nil {
		return err
	}
	if err := sw.w.Flush(); err != nil {
		return err
	}
	sum := binary.LittleEndian.AppendUint32(nil, sw.crc.Sum32())
	// The checksum itself is not checksummed: write it past the hash.
	sw.bytes += 4
	_, err := sw.w.Write(sum)
	if err != nil {
		return err
	}
	return sw.w.Flush()
}

// ReadSnapshot reads a whole snapshot from r, calling fn for each record
// in order; see SnapshotReader. fn's errors are returned as they are.
func ReadSnapshot(r io.Reader, fn func(Header, Record) error) (Header, error) {
	sr, err := NewSnapshotReader(r)
	if err != nil {
		return Header{}, err
	}
	for {
		rec, ok := sr.Next()
		if !ok {
			return sr.Header(), sr.Err()
		}
		if err := fn(sr.Header(), rec); err != nil {
			return sr.Header(), err
		}
	}
}

// SnapshotReader reads a snapshot record by record. Records are handed out
// before the trailer's count and checksum are checked: a caller that
// applies them must discard its work unless Err is nil once Next has
// returned false. It never panics on corrupt input; errors wrap
// ErrNotSnapshot, ErrSnapshotVersion or ErrCorruptSnapshot.
type SnapshotReader struct {
	rd  snapshotReader
	h   Header
	n   uint64
	err error
	end bool
}

// NewSnapshotReader reads the snapshot's header from r.
func NewSnapshotReader(r io.Reader) (*SnapshotReader, error) {
	sr := &SnapshotReader{rd: snapshotReader{src: r, buf: make([]byte, 0, 1<<20)}}
	rd := &sr.rd
	magic := rd.read(&rd.key, len(snapshotMagic))
	if rd.err != nil || string(magic) != snapshotMagic {
		return nil, ErrNotSnapshot
	}
	sr.h.Version = rd.uvarint()
	if rd.err == nil && (sr.h.Version < 1 || sr.h.Version > SnapshotVersion) {
		return nil, fmt.Errorf("%w: %d (this sluice reads 1 to %d)", ErrSnapshotVersion, sr.h.Version, SnapshotVersion)
	}
	sr.h.Seq = rd.uvarint()
	sr.h.Created = rd.varint()
	sr.h.Applied = sr.h.Created
	if sr.h.Version >= 2 {
		sr.h.Applied = rd.varint()
	}
	if rd.err != nil {
		return nil, fmt.Errorf("%w: truncated header: %w", ErrCorruptSnapshot, rd.err)
	}
	return sr, nil
}

// Header is the snapshot's header.
func (sr *SnapshotReader) Header() Header { return sr.h }

// Next returns the next record, or false at the end of the records or on
// an error (see Err). The record's slices are valid until the next call.
func (sr *SnapshotReader) Next() (Record, bool) {
	if sr.end {
		return Record{}, false
	}
	rd := &sr.rd
	kind := rd.byte()
	if rd.err != nil || kind == endOfRecords {
		sr.finish()
		return Record{}, false
	}
	rec := Record{Kind: keyspace.Kind(kind)}
	if !rec.Kind.Valid() {
		sr.end = true
		sr.err = fmt.Errorf("%w: record %d has unknown kind %d", ErrCorruptSnapshot, sr.n, kind)
		return Record{}, false
	}
	rec.Key = rd.read(&rd.key, rd.length(maxKeyLen))
	rec.Word = int64(binary.LittleEndian.Uint64(rd.fixed8()))
	rec.State = rd.read(&rd.state, rd.length(maxStateLen))
	if rd.err != nil {
		sr.finish()
		return Record{}, false
	}
	sr.n++
	return rec, true
}

// Records is how many records Next has returned.
func (sr *SnapshotReader) Records() uint64 { return sr.n }

// Err is nil once the records ended with a trailer whose count and checksum
// match; otherwise it says what was wrong.
func (sr *SnapshotReader) Err() error {
	if !sr.end {
		return fmt.Errorf("%w: records not read to the end", ErrCorruptSnapshot)
	}
	return sr.err
}

// finish reads and checks the trailer.
func (sr *SnapshotReader) finish() {
	sr.end = true
	rd := &sr.rd
	count := rd.uvarint()
	want := rd.sum()
	got := binary.LittleEndian.Uint32(rd.fixed4())
	switch {
	case rd.err != nil:
		sr.err = fmt.Errorf("%w: truncated after %d records: %w", ErrCorruptSnapshot, sr.n, rd.err)
	case count != sr.n:
		sr.err = fmt.Errorf("%w: trailer counts %d records, read %d", ErrCorruptSnapshot, count, sr.n)
	case got != want:
		sr.err = fmt.Errorf("%w: checksum mismatch", ErrCorruptSnapshot)
	case rd.pos < len(rd.buf) || rd.fill():
		sr.err = fmt.Errorf("%w: bytes after the checksum", ErrCorruptSnapshot)
	}
}

// snapshotReader is a buffered reader that reads fields in order,
// remembering the first failure, and checksums what it consumes (lazily, a
// buffer at a time, so the checksum field itself can be left out).
type snapshotReader struct {
	src io.Reader
	buf []byte
	// pos is the next unread byte of buf; buf[:hashed] is in crc.
	pos, hashed int
	crc         uint32
	err         error
	// total counts the bytes read from src.
	total int64
	// key and state are reused record buffers.
	key, state []byte
	small      [8]byte
}

var errTooLong = errors.New("length out of range")

// fill reads the next chunk of src once buf is consumed; it reports
// whether any byte arrived, and records io.ErrUnexpectedEOF otherwise.
func (rd *snapshotReader) fill() bool {
	rd.sum()
	for {
		n, err := rd.src.Read(rd.buf[:cap(rd.buf)])
		rd.buf, rd.pos, rd.hashed = rd.buf[:n], 0, 0
		rd.total += int64(n)
		if n > 0 {
			return true
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			rd.err = err
			return false
		}
	}
}

// sum is the checksum of every byte consumed so far.
func (rd *snapshotReader) sum() uint32 {
	rd.crc = crc32.Update(rd.crc, castagnoli, rd.buf[rd.hashed:rd.pos])
	rd.hashed = rd.pos
	return rd.crc
}

func (rd *snapshotReader) byte() byte {
	if rd.err != nil || (rd.pos == len(rd.buf) && !rd.fill()) {
		return 0
	}
	b := rd.buf[rd.pos]
	rd.pos++
	return b
}

func (rd *snapshotReader) uvarint() uint64 {
	var x uint64
	for shift := 0; shift < 64; shift += 7 {
		b := rd.byte()
		if rd.err != nil {
			return 0
		}
		if shift == 63 && b > 1 {
			break
		}
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return x
		}
	}
	if rd.err == nil {
		rd.err = errTooLong
	}
	return 0
}

func (rd *snapshotReader) varint() int64 {
	ux := rd.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (rd *snapshotReader) length(limit int) int {
	n := rd.uvarint()
	if rd.err == nil && n > uint64(limit) {
		rd.err = errTooLong
	}
	if rd.err != nil {
		return 0
	}
	return int(n)
}

// fixed8 and fixed4 read fixed-width fields (zeros after a failure).
func (rd *snapshotReader) fixed8() []byte {
	b := rd.read(&rd.state, 8)
	if len(b) < 8 {
		return rd.small[:8]
	}
	return b
}

func (rd *snapshotReader) fixed4() []byte {
	b := rd.read(&rd.state, 4)
	if len(b) < 4 {
		return rd.small[:4]
	}
	return b
}

// read reads n bytes into *dst, which the next read into it reuses. The
// buffer grows only as data arrives, so a corrupt length cannot allocate
// more than the input holds.
func (rd *snapshotReader) read(dst *[]byte, n int) []byte {
	b := (*dst)[:0]
	for rd.err == nil && len(b) < n {
		if rd.pos == len(rd.buf) && !rd.fill() {
			break
		}
		take := min(n-len(b), len(rd.buf)-rd.pos)
		b = append(b, rd.buf[rd.pos:rd.pos+take]...)
		rd.pos += take
	}
	*dst = b
	if rd.err != nil {
		return nil
	}
	return b
}
