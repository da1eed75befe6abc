package persist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/slot"
)

// flushEvery is how many encoded bytes a snapshot gathers before writing
// them out; slots are encoded under their lock, written outside it.
const flushEvery = 256 << 10

// WriteSnapshot writes every live key of ks to w in the snapshot format,
// slot by slot: each slot is encoded under its lock (states are changed in
// place, so they cannot be read outside it) and written after the lock is
// released. Keys expired at h.Applied, the state machine's applied instant,
// are left out: the snapshot is the state as it is, at no other instant.
// It returns the record count and bytes written. Slots changed while it
// runs are written as they are when it reaches them; WriteFrozen writes one
// instant exactly.
func WriteSnapshot(w io.Writer, ks *keyspace.Keyspace, h Header) (SaveInfo, error) {
	var buf []byte
	return writeSlots(w, h, func(i int) ([]byte, int, error) {
		s := ks.Lock(i)
		var n int
		var err error
		buf, n, err = EncodeSlotUnordered(buf[:0], s, h.Applied)
		s.Unlock()
		var sk *SkippedKeysError
		if err != nil && !errors.As(err, &sk) {
			return nil, 0, err
		}
		ordered, oerr := OrderRecords(buf)
		if oerr != nil {
			return nil, 0, oerr
		}
		return ordered, n, err
	})
}

// WriteFrozen writes a point-in-time view of a state machine to w in the
// snapshot format, while applies go on (see machine.Frozen). h.Applied is
// taken from the view. The view must have been frozen with EncodeSlot, or
// EncodeSlotUnordered and OrderRecords.
func WriteFrozen(w io.Writer, f *machine.Frozen, h Header) (SaveInfo, error) {
	h.Applied = f.Applied()
	return writeSlots(w, h, f.Slot)
}

// EncodeSlot appends the snapshot records of slot s's keys live at
// applied, and their count; a machine.SlotEncoder. Call it holding the
// slot's lock. A key whose state cannot be encoded (an error, or a panic
// in its encoder) is left out and the others written: the error is then a
// *SkippedKeysError naming the keys, which a snapshot counts and logs
// rather than failing on, so one bad record never stops every snapshot.
func EncodeSlot(dst []byte, s *keyspace.Slot, applied int64) ([]byte, int, error) {
	return encodeSlot(dst, s, applied, s.Keys)
}

// EncodeSlotUnordered is EncodeSlot in the slot's own order: a copy, no
// sort, so the slot's lock is held briefly; OrderRecords then puts the
// records in EncodeSlot's order outside the lock.
func EncodeSlotUnordered(dst []byte, s *keyspace.Slot, applied int64) ([]byte, int, error) {
	return encodeSlot(dst, s, applied, s.KeysUnordered)
}

func encodeSlot(dst []byte, s *keyspace.Slot, applied int64, walk func(int64, func([]byte, keyspace.Entry) bool)) ([]byte, int, error) {
	var state []byte
	var skipped *SkippedKeysError
	n := 0
	walk(applied, func(key []byte, e keyspace.Entry) bool {
		var err error
		state, err = appendStateSafe(state[:0], s, e)
		if err != nil {
			if skipped == nil {
				skipped = &SkippedKeysError{}
			}
			skipped.add(key, err)
			return true
		}
		dst = appendRecord(dst, e.Kind(), key, s.Word(e), state)
		n++
		return true
	})
	if skipped != nil {
		return dst, n, skipped
	}
	return dst, n, nil
}

// OrderRecords sorts a slot's encoded records by key, the order every
// replica writes them in; a machine.SlotOrder.
func OrderRecords(b []byte) ([]byte, error) {
	type rec struct{ start, end, keyStart, keyEnd int }
	var recs []rec
	for off := 0; off < len(b); {
		r := rec{start: off}
		off++ // kind
		klen, k := binary.Uvarint(b[off:])
		if k <= 0 || uint64(len(b)-off-k) < klen {
			return nil, fmt.Errorf("%w: a record the encoder wrote does not decode", ErrCorruptSnapshot)
		}
		off += k
		r.keyStart, r.keyEnd = off, off+int(klen)
		off = r.keyEnd + 8 // word
		slen, k := binary.Uvarint(b[min(off, len(b)):])
		if off > len(b) || k <= 0 || uint64(len(b)-off-k) < slen {
			return nil, fmt.Errorf("%w: a record the encoder wrote does not decode", ErrCorruptSnapshot)
		}
		off += k + int(slen)
		r.end = off
		recs = append(recs, r)
	}
	if slices.IsSortedFunc(recs, func(x, y rec) int { return bytes.Compare(b[x.keyStart:x.keyEnd], b[y.keyStart:y.keyEnd]) }) {
		return b, nil
	}
	slices.SortFunc(recs, func(x, y rec) int { return bytes.Compare(b[x.keyStart:x.keyEnd], b[y.keyStart:y.keyEnd]) })
	out := make([]byte, 0, len(b))
	for _, r := range recs {
		out = append(out, b[r.start:r.end]...)
	}
	return out, nil
}

// appendStateSafe is machine.AppendState with a panic turned into an
// error.
func appendStateSafe(dst []byte, s *keyspace.Slot, e keyspace.Entry) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = dst, fmt.Errorf("%w: panic encoding the state: %v", ErrUnencodable, p)
		}
	}()
	return machine.AppendState(dst, s, e)
}

// SkippedKeysError lists the keys a snapshot left out because their
// states could not be encoded.
type SkippedKeysError struct {
	Keys []string
	Errs []error
}

func (e *SkippedKeysError) add(key []byte, err error) {
	e.Keys = append(e.Keys, string(key))
	e.Errs = append(e.Errs, err)
}

func (e *SkippedKeysError) merge(o *SkippedKeysError) {
	e.Keys = append(e.Keys, o.Keys...)
	e.Errs = append(e.Errs, o.Errs...)
}

func (e *SkippedKeysError) Error() string {
	return fmt.Sprintf("persist: %d key(s) left out of the snapshot, first %q: %v", len(e.Keys), e.Keys[0], e.Errs[0])
}

// Unwrap lets errors.Is see the causes.
func (e *SkippedKeysError) Unwrap() []error { return e.Errs }

// writeSlots writes a snapshot whose slot i's records slot(i) returns,
// gathering them into writes of about flushEvery bytes.
func writeSlots(w io.Writer, h Header, slotRecords func(i int) ([]byte, int, error)) (SaveInfo, error) {
	info := SaveInfo{Seq: h.Seq, Created: h.Created}
	sw, err := newSnapshotWriter(w, h)
	if err != nil {
		return info, err
	}
	buf := make([]byte, 0, flushEvery+flushEvery/4)
	pending := 0
	var skipped SkippedKeysError
	for i := range slot.Count {
		b, n, err := slotRecords(i)
		var sk *SkippedKeysError
		switch {
		case errors.As(err, &sk):
			skipped.merge(sk)
		case err != nil:
			return info, err
		}
		buf = append(buf, b...)
		pending += n
		if len(buf) >= flushEvery {
			if err := sw.writeRecords(buf, pending); err != nil {
				return info, err
			}
			buf, pending = buf[:0], 0
		}
	}
	if err := sw.writeRecords(buf, pending); err != nil {
		return info, err
	}
	if err := sw.finish(); err != nil {
		return info, err
	}
	info.Keys, info.Bytes = int64(sw.records), sw.bytes
	if len(skipped.Keys) > 0 {
		info.Skipped = &skipped
	}
	return info, nil
}

// snapshot writes the data directory's snapshot file: to a temporary
// file, synced, renamed over the old one, and the directory synced, so the
// file is always either the old snapshot or the new one, whole.
func (s *Store) snapshot(reason string) (SaveInfo, error) {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	changes := s.changes()
	info, err := s.writeSnapshotFile()
	s.mu.Lock()
	if err != nil {
		s.lastErr = err
	} else {
		s.last, s.lastErr, s.changes0 = info, nil, changes
		s.saves++
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Error("snapshot failed", "reason", reason, "err", err)
		return info, err
	}
	s.log.Info("snapshot saved", "reason", reason, "file", s.snapPath, "keys", info.Keys,
		"bytes", info.Bytes, "took", info.Took.Round(time.Microsecond))
	if info.Skipped != nil {
		s.skippedKeys.Add(int64(len(info.Skipped.Keys)))
		s.log.Error("snapshot left out keys whose state could not be encoded", "count", len(info.Skipped.Keys),
			"keys", info.Skipped.Keys, "err", info.Skipped)
	}
	// The store learns the snapshot exists, so a later start that cannot
	// find the file refuses instead of starting without its keys; and
	// store records already expired when it was taken can go.
	s.j.meta(metaSnapshot, snapshotMeta{Seq: info.Seq, Created: info.Created}.append(nil))
	s.j.requestGC(info.Created)
	return info, nil
}

func (s *Store) writeSnapshotFile() (SaveInfo, error) {
	began := time.Now()
	h := Header{Seq: s.j.lastSeq(), Created: s.deps.Now(), Applied: s.deps.Applied()}
	f, err := s.fs.Create(s.tempPath, vfs.WriteCategoryUnspecified)
	if err != nil {
		return SaveInfo{}, fmt.Errorf("persist: write snapshot %s: %w", s.tempPath, err)
	}
	info, err := WriteSnapshot(f, s.deps.Keys, h)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		// Every quota change the snapshot may hold is numbered at most
		// this; the store must have them all on disk before the snapshot
		// replaces the old one (startup prefers the store's quotas).
		err = s.j.syncThrough(s.j.lastSeq())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(s.tempPath, s.snapPath)
	}
	if err == nil {
		err = syncDir(s.fs, s.opts.Dir)
	}
	if err != nil {
		s.fs.Remove(s.tempPath)
		return info, fmt.Errorf("persist: write snapshot %s: %w", s.snapPath, err)
	}
	info.Took = time.Since(began)
	return info, nil
}

// syncDir makes a rename in dir durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
