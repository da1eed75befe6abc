package persist

import (
	"strconv"
	"time"
)

// Info is the store's part of INFO persistence, in Redis' field names where
// Redis has one (rdb_* describe snapshots) and sluice_* otherwise.
func (s *Store) Info() [][2]string {
	s.mu.Lock()
	last, lastErr, saves, changes0, loaded := s.last, s.lastErr, s.saves, s.changes0, s.loaded
	s.mu.Unlock()
	j := s.j
	j.mu.Lock()
	seq, committed, synced, gcRemoved := j.seq, j.committed, j.synced, j.gc.removed
	j.mu.Unlock()
	jErr := s.Err()

	status := func(err error) string {
		if err != nil {
			return "err"
		}
		return "ok"
	}
	took := int64(-1)
	if saves > 0 {
		took = int64(last.Took.Seconds())
	}
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	u64 := func(n uint64) string { return strconv.FormatUint(n, 10) }
	b01 := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	fields := [][2]string{
		{"rdb_changes_since_last_save", i64(s.changes() - changes0)},
		{"rdb_bgsave_in_progress", b01(s.bgRunning.Load())},
		{"rdb_last_save_time", i64(last.Created / 1e9)},
		{"rdb_last_bgsave_status", status(lastErr)},
		{"rdb_last_bgsave_time_sec", i64(took)},
		{"rdb_saves", i64(saves)},
		{"aof_enabled", "0"},
		{"sluice_snapshot_file", s.snapPath},
		{"sluice_snapshot_interval_sec", i64(int64(s.opts.SnapshotInterval.Seconds()))},
		{"sluice_snapshot_seq", u64(last.Seq)},
		{"sluice_snapshot_keys", i64(last.Keys)},
		{"sluice_snapshot_bytes", i64(last.Bytes)},
		{"sluice_snapshot_took_usec", i64(last.Took.Microseconds())},
		{"sluice_load_snapshot_keys", i64(loaded.SnapshotKeys)},
		{"sluice_load_quota_keys", i64(loaded.QuotaKeys)},
		{"sluice_load_expired", i64(loaded.Expired)},
		{"sluice_load_superseded", i64(loaded.Superseded)},
		{"sluice_load_took_usec", i64(loaded.Took.Microseconds())},
		{"sluice_quota_store", s.dbPath},
		{"sluice_quota_fsync", s.opts.QuotaFsync.String()},
		{"sluice_quota_status", status(jErr)},
		{"sluice_quota_seq", u64(seq)},
		{"sluice_quota_committed_seq", u64(committed)},
		{"sluice_quota_synced_seq", u64(synced)},
		{"sluice_quota_changes_written", i64(j.written.Load())},
		{"sluice_quota_commits", i64(j.commits.Load())},
		{"sluice_quota_fsyncs", i64(j.syncs.Load())},
		{"sluice_quota_expired_removed", i64(gcRemoved)},
		{"sluice_quota_disk_faults", i64(s.health.faults.Load())},
	}
	return fields
}

// Counters are the store's numbers for metrics.
type Counters struct {
	// Commits and Syncs count quota store batch commits and fsyncs;
	// Written counts the changes they carried.
	Commits, Syncs, Written int64
	// SnapshotCreated is when the last snapshot was taken (Unix ns; 0:
	// none), SnapshotTook how long writing it took, SnapshotBytes its size.
	SnapshotCreated int64
	SnapshotTook    time.Duration
	SnapshotBytes   int64
	// StoreFailed reports the quota store failing (a full disk, an I/O
	// error); SnapshotFailed the last snapshot attempt failing.
	StoreFailed, SnapshotFailed bool
	// SnapshotSkippedKeys counts keys snapshots left out because their
	// states could not be encoded.
	SnapshotSkippedKeys int64
}

// Counters reads the store's counters.
func (s *Store) Counters() Counters {
	s.mu.Lock()
	last, lastErr := s.last, s.lastErr
	s.mu.Unlock()
	return Counters{
		Commits: s.j.commits.Load(), Syncs: s.j.syncs.Load(), Written: s.j.written.Load(),
		SnapshotCreated: last.Created, SnapshotTook: last.Took, SnapshotBytes: last.Bytes,
		StoreFailed: s.Err() != nil, SnapshotFailed: lastErr != nil,
		SnapshotSkippedKeys: s.skippedKeys.Load(),
	}
}
