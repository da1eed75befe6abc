package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// Store is a raft.LogStore and raft.StableStore. It is safe for concurrent
// use: raft reads entries from its replication goroutines while the leader
// loop appends.
type Store struct {
	// mu guards db against Close: every call holds it for reading, Close
	// for writing.
	mu sync.RWMutex
	db *pebble.DB // nil once closed
	// writeMu serialises the writes to the log, so first and last follow
	// the database in the order the writes were made.
	writeMu sync.Mutex
	// first and last cache the lowest and highest stored indexes (0 when
	// the log is empty): raft asks for them on every append and
	// replication round, and they change only with a write.
	first, last atomic.Uint64
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// Open opens (or creates) the store described by o.
func Open(o Options) (*Store, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.FS = fsOrDisk(o.FS)
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := openDB(o, log)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db}
	if err := s.loadBounds(db); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the database; later calls return ErrClosed. Closing twice
// is not an error.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	if err != nil {
		return fmt.Errorf("raftlog: close: %w", err)
	}
	return nil
}

// open returns the database with s.mu held for reading; the caller calls
// s.mu.RUnlock when done, also on error.
func (s *Store) open() (*pebble.DB, error) {
	s.mu.RLock()
	if s.db == nil {
		return nil, ErrClosed
	}
	return s.db, nil
}

// FirstIndex returns the lowest stored index, 0 when the log is empty.
func (s *Store) FirstIndex() (uint64, error) {
	defer s.mu.RUnlock()
	if _, err := s.open(); err != nil {
		return 0, err
	}
	return s.first.Load(), nil
}

// LastIndex returns the highest stored index, 0 when the log is empty.
func (s *Store) LastIndex() (uint64, error) {
	defer s.mu.RUnlock()
	if _, err := s.open(); err != nil {
		return 0, err
	}
	return s.last.Load(), nil
}

// GetLog reads the entry at index into l. A missing entry is
// raft.ErrLogNotFound, unwrapped (raft compares it with ==). l's byte
// slices are the caller's: they do not alias the database.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	defer s.mu.RUnlock()
	db, err := s.open()
	if err != nil {
		return err
	}
	v, closer, err := db.Get(logKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("raftlog: read entry %d: %w", index, err)
	}
	rec := bytes.Clone(v)
	_ = closer.Close()
	var got raft.Log
	if err := decodeRecord(rec, &got); err != nil {
		return fmt.Errorf("raftlog: entry %d: %w", index, err)
	}
	if got.Index != index {
		return fmt.Errorf("raftlog: entry %d: %w: record holds index %d", index, ErrCorrupt, got.Index)
	}
	*l = got
	return nil
}

// StoreLog stores one entry, synced.
func (s *Store) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs stores the entries in one synced batch: all of them or none
// reach the disk. Indexes need not follow the last stored one (raft leaves
// a gap after installing a snapshot); an index already stored is
// overwritten.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	defer s.mu.RUnlock()
	db, err := s.open()
	if err != nil {
		return err
	}
	if len(logs) == 0 {
		return nil
	}
	b := db.NewBatch()
	defer b.Close()
	lo, hi := uint64(math.MaxUint64), uint64(0)
	var rec []byte
	for _, l := range logs {
		rec = appendRecord(rec[:0], l)
		if err := b.Set(logKey(l.Index), rec, nil); err != nil {
			return fmt.Errorf("raftlog: store entry %d: %w", l.Index, err)
		}
		lo, hi = min(lo, l.Index), max(hi, l.Index)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("raftlog: store entries %d to %d: %w", lo, hi, err)
	}
	if first := s.first.Load(); first == 0 || lo < first {
		s.first.Store(lo)
	}
	if hi > s.last.Load() {
		s.last.Store(hi)
	}
	return nil
}

// DeleteRange deletes the entries from lo to hi, both included, synced.
// Raft truncates the head after a snapshot and the tail when a new leader
// overrides entries that were never committed.
func (s *Store) DeleteRange(lo, hi uint64) error {
	defer s.mu.RUnlock()
	db, err := s.open()
	if err != nil {
		return err
	}
	if lo > hi {
		return nil
	}
	end := logEnd
	if hi < math.MaxUint64 {
		end = logKey(hi + 1)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := db.DeleteRange(logKey(lo), end, pebble.Sync); err != nil {
		return fmt.Errorf("raftlog: delete entries %d to %d: %w", lo, hi, err)
	}
	return s.loadBounds(db)
}

// loadBounds reads the first and last index from the database. Callers
// hold writeMu, or own s alone.
func (s *Store) loadBounds(db *pebble.DB) error {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: logStart, UpperBound: logEnd})
	if err != nil {
		return fmt.Errorf("raftlog: read log bounds: %w", err)
	}
	var first, last uint64
	if it.First() {
		var ok bool
		if first, ok = logIndex(it.Key()); !ok {
			_ = it.Close()
			return fmt.Errorf("%w: log key %x", ErrCorrupt, it.Key())
		}
		it.Last()
		if last, ok = logIndex(it.Key()); !ok {
			_ = it.Close()
			return fmt.Errorf("%w: log key %x", ErrCorrupt, it.Key())
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("raftlog: read log bounds: %w", err)
	}
	s.first.Store(first)
	s.last.Store(last)
	return nil
}

// Set stores val under key, synced.
func (s *Store) Set(key, val []byte) error {
	defer s.mu.RUnlock()
	db, err := s.open()
	if err != nil {
		return err
	}
	if err := db.Set(stableKey(key), val, pebble.Sync); err != nil {
		return fmt.Errorf("raftlog: set %q: %w", key, err)
	}
	return nil
}

// Get returns the value stored under key (a copy), or ErrKeyNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	defer s.mu.RUnlock()
	db, err := s.open()
	if err != nil {
		return nil, err
	}
	v, closer, err := db.Get(stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("raftlog: get %q: %w", key, err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// SetUint64 stores val under key as 8 big-endian bytes, synced.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the number SetUint64 stored under key, or
// ErrKeyNotFound. A value of another length is ErrCorrupt.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftlog: get %q: %w: %d bytes, want 8", key, ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
