package persist

import (
	"encoding/binary"
	"hash/crc32"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// SyncedFile, in the data directory, records the last journal sequence
// number the quota store synced, outside the store: the store's own record
// of it lives in the log it would vouch for, so a damaged or truncated log
// (which Pebble may take for a crash's torn tail and silently stop at)
// takes that record with it. At startup a store numbered below it has lost
// writes it had on disk, and is refused.
//
// Format: seq, 8 bytes little-endian, then the CRC-32C of those 8 bytes,
// 4 bytes little-endian; rewritten in place after each sync, never synced
// itself. It can only lag the truth (written after the sync, lost with
// the page cache), so it never accuses a store wrongly; a torn or missing
// file reads as 0.
const SyncedFile = "quotas.synced"

const witnessSize = 12

// witness keeps SyncedFile up to date.
type witness struct {
	mu   sync.Mutex
	f    vfs.File
	last uint64
	buf  [witnessSize]byte
}

// readWitness returns the sequence number SyncedFile records, or 0.
func readWitness(fs vfs.FS, path string) uint64 {
	f, err := fs.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var b [witnessSize]byte
	if n, _ := f.ReadAt(b[:], 0); n != witnessSize {
		return 0
	}
	if crc32.Checksum(b[:8], castagnoli) != binary.LittleEndian.Uint32(b[8:]) {
		return 0
	}
	return binary.LittleEndian.Uint64(b[:8])
}

// openWitness opens SyncedFile for rewriting, keeping what it says until
// the next sync; nil when it cannot (the check it serves is then weaker,
// never wrong).
func openWitness(fs vfs.FS, path string) *witness {
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil
	}
	return &witness{f: f}
}

// record notes that every change up to seq is synced.
func (w *witness) record(seq uint64) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if seq < w.last {
		return
	}
	w.last = seq
	binary.LittleEndian.PutUint64(w.buf[:8], seq)
	binary.LittleEndian.PutUint32(w.buf[8:], crc32.Checksum(w.buf[:8], castagnoli))
	w.f.WriteAt(w.buf[:], 0) // best effort: a stale record only weakens the check
}

func (w *witness) close() {
	if w != nil {
		w.f.Close()
	}
}
