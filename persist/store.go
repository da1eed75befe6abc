package persist

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/quota"
)

// Names inside the data directory.
const (
	// SnapshotFile is the last complete snapshot of the keyspace.
	SnapshotFile = "snapshot.sluice"
	// snapshotTemp is where a snapshot is written before it replaces
	// SnapshotFile.
	snapshotTemp = SnapshotFile + ".tmp"
	// QuotaStoreDir is the Pebble database of quota states.
	QuotaStoreDir = "quotas"
)

// Deps are what a Store works on, supplied by the server.
type Deps struct {
	// Keys is the keyspace to restore into and snapshot.
	Keys *keyspace.Keyspace
	// Now is the server clock, Unix ns: it dates snapshots (for people
	// and LASTSAVE), and never decides what is live.
	Now func() int64
	// Applied is the state machine's applied instant: snapshots take the
	// keys live at it and record it.
	Applied func() int64
	// Restore receives the applied instant of the state loaded at Open,
	// before Open returns, for the state machine to resume from.
	Restore func(applied int64)
	// Log receives what was loaded and saved; nil discards.
	Log *slog.Logger
	// Changes counts changes to the keyspace (a snapshot is skipped when it
	// has not moved); nil means unknown, and every interval snapshots.
	Changes func() int64
}

// Store is sluice's persistence: the quota journal and store, and
// snapshots of the whole keyspace. Its methods are safe for concurrent use.
type Store struct {
	opts Options
	fs   vfs.FS
	deps Deps
	log  *slog.Logger

	snapPath, tempPath, dbPath, witnessPath string

	db *pebble.DB
	j  *journal
	// health is the quota store's disk state (health.go); lock holds the
	// data directory (lock.go).
	health *health
	lock   io.Closer

	// skippedKeys counts keys snapshots left out (SaveInfo.Skipped).
	skippedKeys atomic.Int64
	// snapMu lets one snapshot run at a time.
	snapMu sync.Mutex
	// bgRunning is set while a background save runs; bgAgain asks it to
	// run once more (BGSAVE SCHEDULE).
	bgRunning, bgAgain atomic.Bool
	bgWG               sync.WaitGroup

	mu       sync.Mutex
	last     SaveInfo // last successful snapshot (loaded or written)
	lastErr  error    // last snapshot failure, nil after a success
	saves    int64
	changes0 int64 // Changes() when the last snapshot began
	loaded   LoadInfo

	stop      chan struct{}
	loops     sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// SaveInfo describes a snapshot.
type SaveInfo struct {
	// Seq and Created are the snapshot's header fields.
	Seq     uint64
	Created int64
	// Keys and Bytes are its record count and file size.
	Keys  int64
	Bytes int64
	// Took is how long it took to write (0 for one loaded at startup).
	Took time.Duration
	// Skipped names the keys left out because their states could not be
	// encoded (nil: none); the snapshot holds every other key.
	Skipped *SkippedKeysError
}

// Open opens the data directory and restores the keyspace from it: the last
// snapshot (keys already expired dropped) and the quota store, which is
// newer than any snapshot for quota keys. Any file that cannot be read is
// an error naming it; Open never starts empty over data it cannot read.
// The returned Store journals quota changes and snapshots every
// SnapshotInterval until Close.
func Open(opts Options, deps Deps) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if deps.Keys == nil || deps.Now == nil || deps.Applied == nil {
		return nil, fmt.Errorf("%w: no keyspace, clock or applied instant", ErrOptions)
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	s := &Store{
		opts: opts, fs: fs, deps: deps, log: deps.Log,
		snapPath:    fs.PathJoin(opts.Dir, SnapshotFile),
		tempPath:    fs.PathJoin(opts.Dir, snapshotTemp),
		witnessPath: fs.PathJoin(opts.Dir, SyncedFile),
		dbPath:      fs.PathJoin(opts.Dir, QuotaStoreDir),
		stop:        make(chan struct{}),
		health:      newHealth(deps.Log),
	}
	if err := fs.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("persist: create data dir %s: %w", opts.Dir, err)
	}
	lock, err := lockDataDir(fs, opts.Dir)
	if err != nil {
		return nil, err
	}
	s.lock = lock
	if err := s.open(); err != nil {
		lock.Close()
		return nil, err
	}
	s.changes0 = s.changes()
	if opts.SnapshotInterval > 0 {
		s.loops.Add(1)
		go s.snapshotLoop()
	}
	return s, nil
}

// open prepares the data directory, opens the quota store and restores the
// keyspace. The store's disk operations fail at once while it opens: a
// directory that cannot be opened is refused, not waited for. With
// RebuildQuotaStore, a store that is missing, damaged or behind its
// snapshot is moved aside and rebuilt from the snapshot; a sound one is
// kept (the flag is safe to leave on).
func (s *Store) open() error {
	if err := s.removeLeftovers(); err != nil {
		return err
	}
	if err := checkFreeSpace(s.fs, s.opts.Dir, s.dbPath); err != nil {
		return err
	}
	err := s.openAndLoad(false)
	var bad *storeError
	if err == nil || !s.opts.RebuildQuotaStore || !errors.As(err, &bad) {
		return err
	}
	if _, serr := s.fs.Stat(s.snapPath); serr != nil {
		return err // nothing to rebuild from
	}
	aside := fmt.Sprintf("%s.damaged-%d", s.dbPath, time.Now().Unix())
	s.log.Error("REBUILDING the quota store from the snapshot: every quota is reset to the snapshot's, quota changes made after it are lost",
		"store", s.dbPath, "cause", err, "moved_to", aside, "snapshot", s.snapPath)
	s.deps.Keys.FlushAll(nil) // drop what the failed load restored
	if names, _ := s.fs.List(s.dbPath); len(names) > 0 {
		if err := s.fs.Rename(s.dbPath, aside); err != nil {
			return fmt.Errorf("persist: move quota store %s aside: %w", s.dbPath, err)
		}
	}
	return s.openAndLoad(true)
}

// openAndLoad opens the quota store and restores the keyspace; rebuilding
// says the store is new on purpose, built from the snapshot.
func (s *Store) openAndLoad(rebuilding bool) error {
	if !rebuilding {
		if err := s.checkStoreExists(); err != nil {
			return err
		}
	}
	if err := makeDirs(s.fs, s.opts.Dir, s.dbPath); err != nil {
		return fmt.Errorf("persist: create data dir %s: %w", s.opts.Dir, err)
	}
	s.health.failFast.Store(true)
	db, fresh, err := openDB(healthFS{FS: s.fs, h: s.health}, s.dbPath, s.log)
	if err != nil {
		return err
	}
	s.db = db
	seq, err := s.load(fresh)
	if err != nil {
		db.Close()
		s.db = nil
		return err
	}
	s.health.failFast.Store(false)
	s.j = newJournal(db, s.opts.QuotaFsync, s.log, seq, s.health)
	s.j.witness = openWitness(s.fs, s.witnessPath)
	return nil
}

// checkStoreExists refuses a data directory whose snapshot exists but whose
// quota store is gone: every snapshot is written beside a store, so the
// store was deleted or lost, and its quotas are newer than the snapshot's.
func (s *Store) checkStoreExists() error {
	names, err := s.fs.List(s.dbPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("persist: read quota store %s: %w", s.dbPath, err)
	}
	if len(names) > 0 {
		return nil
	}
	if _, err := s.fs.Stat(s.snapPath); err == nil {
		return storeFault(fmt.Errorf("%w: %s does not exist or is empty, but snapshot %s does: quotas changed since it would be lost. "+
			"Restore the directory, or start once with --rebuild-quota-store to rebuild it from the snapshot",
			ErrMissingStore, s.dbPath, s.snapPath))
	}
	if seq := readWitness(s.fs, s.witnessPath); seq > 0 {
		return fmt.Errorf("%w: %s does not exist or is empty, but %s says it held changes up to %d. "+
			"Restore the directory, or delete %s to start with no quotas",
			ErrMissingStore, s.dbPath, s.witnessPath, seq, s.witnessPath)
	}
	return nil
}

// removeLeftovers deletes what a crash can leave behind: a snapshot that
// was being written.
func (s *Store) removeLeftovers() error {
	err := s.fs.Remove(s.tempPath)
	switch {
	case err == nil:
		s.log.Warn("removed an unfinished snapshot left by a crash", "file", s.tempPath)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("persist: remove unfinished snapshot %s: %w", s.tempPath, err)
	}
	return nil
}

func (s *Store) changes() int64 {
	if s.deps.Changes == nil {
		return 0
	}
	return s.deps.Changes()
}

// QuotaChanged journals key's new quota state. Call it under the key's slot
// lock, right after the change. It returns the sequence number to pass to
// Wait before replying, or 0 when the reply need not wait.
func (s *Store) QuotaChanged(key []byte, st *quota.State) uint64 {
	return s.j.quotaChanged(key, st)
}

// QuotaDeleted journals the deletion of quota key key (under its slot lock).
func (s *Store) QuotaDeleted(key []byte) uint64 { return s.j.quotaDeleted(key) }

// Flushed journals that every key was dropped. Call it while every slot is
// locked (keyspace.FlushAll), so no change is ordered on the wrong side of
// it.
func (s *Store) Flushed() uint64 { return s.j.flushed() }

// Wait blocks until change seq is as durable as the fsync policy promises a
// reply: on disk for FsyncAlways; for the other policies it returns at once
// unless the journal's backlog is over its bound. Call it after releasing
// every lock.
func (s *Store) Wait(seq uint64) error {
	if seq == 0 {
		return nil
	}
	return s.j.wait(seq)
}

// Err is the error that stops quota changes from reaching the disk, or
// nil. Commands refuse quota writes while it is set. A disk fault (full,
// failing) clears by itself once the disk takes writes again.
func (s *Store) Err() error {
	if err := s.j.failed(); err != nil {
		return err
	}
	return s.health.Err()
}

// Save writes a snapshot now, in the caller's goroutine (SAVE). It fails
// with ErrSaveInProgress while a background save runs.
func (s *Store) Save() error {
	if s.bgRunning.Load() {
		return ErrSaveInProgress
	}
	_, err := s.snapshot("save")
	return err
}

// BackgroundSave starts a snapshot in the background (BGSAVE). When one is
// already running it fails with ErrSaveInProgress, unless schedule is set:
// then another runs after it and started is false.
func (s *Store) BackgroundSave(schedule bool) (started bool, err error) {
	if !s.bgRunning.CompareAndSwap(false, true) {
		if schedule {
			s.bgAgain.Store(true)
			return false, nil
		}
		return false, ErrSaveInProgress
	}
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		for {
			s.snapshot("bgsave")
			if !s.bgAgain.Swap(false) {
				break
			}
		}
		s.bgRunning.Store(false)
	}()
	return true, nil
}

// LastSave is when the last snapshot was begun (LASTSAVE), Unix seconds:
// the one written last, else the one loaded at startup, else the instant
// the store opened.
func (s *Store) LastSave() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last.Created / 1e9
}

// Loaded reports what Open restored.
func (s *Store) Loaded() LoadInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loaded
}

// LastSnapshot describes the last snapshot written or loaded.
func (s *Store) LastSnapshot() SaveInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// snapshotLoop snapshots every SnapshotInterval while something changed.
func (s *Store) snapshotLoop() {
	defer s.loops.Done()
	t := time.NewTicker(s.opts.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		idle := s.deps.Changes != nil && s.changes() == s.changes0 && s.lastErr == nil
		s.mu.Unlock()
		if idle || !s.bgRunning.CompareAndSwap(false, true) {
			continue
		}
		s.snapshot("interval")
		s.bgRunning.Store(false)
	}
}

// Close stops the periodic snapshots, waits for a background save, writes
// a final snapshot, writes and syncs every journaled change, and closes the
// quota store. Changes made after Close began may miss the snapshot. When
// the quota store cannot write (a full disk), Close does not wait for it:
// it returns the fault, and changes not yet on disk are lost.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.loops.Wait()
		s.bgWG.Wait()
		_, snapErr := s.snapshot("shutdown")
		if err := s.unlessFault(s.j.close); err != nil {
			s.closeErr = errors.Join(snapErr, err)
			return
		}
		dbErr := s.unlessFault(s.db.Close)
		if dbErr != nil {
			dbErr = fmt.Errorf("persist: close quota store %s: %w", s.dbPath, dbErr)
		} else {
			s.j.witness.close()
			s.lock.Close()
		}
		s.closeErr = errors.Join(snapErr, s.j.failed(), dbErr)
	})
	return s.closeErr
}

// unlessFault runs f and returns its error, or returns early with the
// store's disk fault if there is one: f may then be stuck retrying a
// write, and is left to the process's exit.
func (s *Store) unlessFault(f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	for {
		changed, fault := s.health.watch()
		if fault != nil {
			s.log.Error("quota store not closed: it cannot write; quota changes not yet on disk are lost", "dir", s.dbPath, "err", fault)
			return fault
		}
		select {
		case err := <-done:
			return err
		case <-changed:
		}
	}
}

// makeDirs creates the data directory and the quota store's, and syncs
// their parents, so the directories themselves survive a crash (a store
// whose directory entry is lost is a store lost).
func makeDirs(fs vfs.FS, dataDir, storeDir string) error {
	if err := fs.MkdirAll(storeDir, 0o755); err != nil {
		return err
	}
	for _, d := range []string{fs.PathDir(dataDir), dataDir} {
		if err := syncDir(fs, d); err != nil {
			return err
		}
	}
	return nil
}

// minFreeSpace is the free space the quota store needs to open beyond the
// size of its write-ahead logs, which opening may turn into tables: a new
// log, manifest and options file.
const minFreeSpace = 4 << 20

// checkFreeSpace refuses to open a store on a disk too full to open it:
// Pebble would otherwise fail in the background, over and over, or stop
// the process.
func checkFreeSpace(fs vfs.FS, dataDir, storeDir string) error {
	usage, err := fs.GetDiskUsage(dataDir)
	if err != nil {
		return nil // unknown (a test file system): Open reports what fails
	}
	need := uint64(minFreeSpace)
	names, _ := fs.List(storeDir)
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			if fi, err := fs.Stat(fs.PathJoin(storeDir, n)); err == nil {
				need += uint64(fi.Size())
			}
		}
	}
	if usage.AvailBytes < need {
		return fmt.Errorf("persist: data directory %s: %d bytes free, the quota store needs %d to open: %w",
			dataDir, usage.AvailBytes, need, syscall.ENOSPC)
	}
	return nil
}
