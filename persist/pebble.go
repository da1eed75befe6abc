package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/internal/pebblelog"
	"github.com/sluice-rl/sluice/slot"
)

// The quota store is a Pebble database. Its keys:
//
//	'q' | slot (2 bytes, big-endian) | user key   →  expireAt (8 bytes LE, Unix ns) | quota.State encoding
//	"m:seq"       →  uvarint: the last journal sequence number committed
//	"m:flush"     →  uvarint: the sequence number of the last FLUSHALL
//	"m:snapshot"  →  uvarint seq | varint created: the last snapshot written
//
// The slot prefix keeps each hash slot's quotas contiguous, so a slot can
// be scanned or dropped as a range when slots move between nodes.
const (
	quotaPrefix    = 'q'
	quotaKeyHeader = 3
	expirySize     = 8
	// recordMarker starts the value of a journaled record that is not a
	// quota (an RL.OVERRIDE or RL.SCALE), after the expiry; the kind
	// follows. A quota value starts with its period byte, which is never
	// this.
	recordMarker = 0x7f
)

var (
	metaSeq      = []byte("m:seq")
	metaFlush    = []byte("m:flush")
	metaSnapshot = []byte("m:snapshot")
	// quotaStart and quotaEnd bound every quota key.
	quotaStart = []byte{quotaPrefix}
	quotaEnd   = []byte{quotaPrefix + 1}
)

// appendQuotaKey appends the store key of user key key.
func appendQuotaKey(dst, key []byte) []byte {
	slot := slot.Of(key)
	dst = append(dst, quotaPrefix, byte(slot>>8), byte(slot))
	return append(dst, key...)
}

// splitQuotaKey returns the user key of a store key, checking its slot.
func splitQuotaKey(k []byte) ([]byte, bool) {
	if len(k) < quotaKeyHeader || k[0] != quotaPrefix {
		return nil, false
	}
	key := k[quotaKeyHeader:]
	return key, int(k[1])<<8|int(k[2]) == slot.Of(key)
}

// Quota store memory (see openDB).
const (
	memTableSize   = 8 << 20
	blockCacheSize = 1 << 20
)

// openDB opens the quota store at dir. A directory holding anything is
// opened with ErrorIfNotExists, so files that lost their database (a
// deleted CURRENT or MANIFEST) are an error rather than a new, empty
// store. fresh reports that the store was created now.
func openDB(fs vfs.FS, dir string, log *slog.Logger) (db *pebble.DB, fresh bool, err error) {
	names, err := fs.List(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		fresh = true
	case err != nil:
		return nil, false, fmt.Errorf("persist: open quota store %s: %w", dir, err)
	default:
		fresh = len(names) == 0
	}
	opts := &pebble.Options{
		FS:               fs,
		Logger:           pebblelog.Logger{Log: log},
		ErrorIfNotExists: !fresh,
		// WAL sync chunks record how far the log was synced, so a damaged
		// record before that point is reported as corruption instead of
		// being taken for the torn tail of a crash (everything after it
		// silently dropped).
		FormatMajorVersion: pebble.FormatWALSyncChunks,
		// Pebble keeps two memtables (the one filling, one recycled or
		// flushing), each touched whole once full: 32 MiB made a quota key
		// cost ~150 B of RSS at 1M keys, 8 MiB ~100 B
		// (scripts/bench_memory.sh), for the same QUOTA.CHECK throughput.
		// A flush keeps only a key's last version, so hot keys still
		// reach an sstable once per memtable.
		MemTableSize: memTableSize,
		// The store is read at startup and by the expired-record sweep
		// only; Pebble's 8 MiB default would cache blocks nobody reads
		// again.
		CacheSize: blockCacheSize,
		// Pebble's default exits the process on a checksum failure; the
		// read that met it returns an error too, which is how sluice
		// reports it (startup refuses, naming the file).
		EventListener: &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
			log.Error("quota store corruption", "file", info.Path, "err", info.Details)
		}},
	}
	db, err = pebble.Open(dir, opts)
	if err != nil {
		return nil, false, storeFault(fmt.Errorf("persist: open quota store %s: %w", dir, err))
	}
	return db, fresh, nil
}

// getUvarint reads a uvarint meta value; ok is false when it is absent.
func getUvarint(db *pebble.DB, key []byte) (v uint64, ok bool, err error) {
	b, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, false, fmt.Errorf("%w: meta key %s", ErrCorruptStore, key)
	}
	return v, true, nil
}

// snapshotMeta is what "m:snapshot" records.
type snapshotMeta struct {
	Seq     uint64
	Created int64
}

func (m snapshotMeta) append(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, m.Seq)
	return binary.AppendVarint(dst, m.Created)
}

func getSnapshotMeta(db *pebble.DB) (m snapshotMeta, ok bool, err error) {
	b, closer, err := db.Get(metaSnapshot)
	if errors.Is(err, pebble.ErrNotFound) {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	defer closer.Close()
	seq, n := binary.Uvarint(b)
	created, k := binary.Varint(b[max(n, 0):])
	if n <= 0 || k <= 0 || n+k != len(b) {
		return m, false, fmt.Errorf("%w: meta key %s", ErrCorruptStore, metaSnapshot)
	}
	return snapshotMeta{Seq: seq, Created: created}, true, nil
}
