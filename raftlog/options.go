package raftlog

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configure a Store.
type Options struct {
	// Dir is the directory of the Pebble database; it is created if
	// missing. A directory that holds files but no database is refused
	// rather than silently started empty (a lost log is a lost vote).
	Dir string
	// FS is the file system; nil means the disk. Tests use vfs.NewMem().
	FS vfs.FS
	// MemTableSize is the size of Pebble's in-memory write buffer. Raft
	// entries are written once and deleted after a snapshot, so most of
	// them should die in the memtable before reaching an sstable.
	MemTableSize uint64
	// Logger receives Pebble's messages (routine ones at debug level); nil
	// discards them.
	Logger *slog.Logger
}

// Bounds of MemTableSize: Pebble needs a few pages, and refuses 4 GiB and
// more.
const (
	minMemTableSize = 1 << 20
	maxMemTableSize = 1 << 30
)

// DefaultOptions are the defaults for a store in dir.
func DefaultOptions(dir string) Options {
	return Options{Dir: dir, MemTableSize: 16 << 20}
}

// Validate reports the first option that cannot work.
func (o Options) Validate() error {
	if o.Dir == "" {
		return fmt.Errorf("%w: dir is empty", ErrOptions)
	}
	if o.MemTableSize < minMemTableSize || o.MemTableSize > maxMemTableSize {
		return fmt.Errorf("%w: memtable size %d: want %d to %d bytes", ErrOptions, o.MemTableSize, minMemTableSize, maxMemTableSize)
	}
	return nil
}
