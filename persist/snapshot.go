package persist

import (
	"fmt"
	"io"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/keyspace"
)

// flushEvery is how many encoded bytes a snapshot gathers before writing
// them out; slots are encoded under their lock, written outside it.
const flushEvery = 256 << 10

// WriteSnapshot writes every live key of ks to w in the snapshot format,
// slot by slot: each slot is encoded under its lock (states are changed in
// place, so they cannot be read outside it) and written after the lock is
// released. Keys expired at h.Created are left out. It returns the record
// count and bytes written.
func WriteSnapshot(w io.Writer, ks *keyspace.Keyspace, h Header) (SaveInfo, error) {
	info := SaveInfo{Seq: h.Seq, Created: h.Created}
	sw, err := newSnapshotWriter(w, h)
	if err != nil {
		return info, err
	}
	buf := make([]byte, 0, flushEvery+flushEvery/4)
	var state []byte
	pending := 0
	for slot := range cluster.SlotCount {
		s, now := ks.Lock(slot, h.Created)
		var encErr error
		s.Keys(now, func(key []byte, e keyspace.Entry) bool {
			state, encErr = appendState(state[:0], e.Kind(), s.Object(e))
			if encErr != nil {
				encErr = fmt.Errorf("key %q: %w", key, encErr)
				return false
			}
			buf = appendRecord(buf, e.Kind(), key, s.Word(e), state)
			pending++
			return true
		})
		s.Unlock()
		if encErr != nil {
			return info, encErr
		}
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
	// The store learns the snapshot exists, so a later start that cannot
	// find the file refuses instead of starting without its keys; and
	// store records already expired when it was taken can go.
	s.j.meta(metaSnapshot, snapshotMeta{Seq: info.Seq, Created: info.Created}.append(nil))
	s.j.requestGC(info.Created)
	return info, nil
}

func (s *Store) writeSnapshotFile() (SaveInfo, error) {
	began := time.Now()
	h := Header{Seq: s.j.lastSeq(), Created: s.deps.Now()}
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
