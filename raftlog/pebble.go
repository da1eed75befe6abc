package raftlog

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/internal/pebblelog"
)

// openDB opens the database in o.Dir. A directory holding anything is
// opened with ErrorIfNotExists, so files that lost their database (a
// deleted CURRENT or MANIFEST) are an error rather than a new, empty log —
// a node that forgot its vote could vote twice in one term.
func openDB(o Options, log *slog.Logger) (*pebble.DB, error) {
	names, err := o.FS.List(o.Dir)
	fresh := false
	switch {
	case errors.Is(err, os.ErrNotExist):
		fresh = true
	case err != nil:
		return nil, fmt.Errorf("raftlog: open %s: %w", o.Dir, err)
	default:
		fresh = len(names) == 0
	}
	db, err := pebble.Open(o.Dir, &pebble.Options{
		FS:               o.FS,
		Logger:           pebblelog.Logger{Log: log},
		ErrorIfNotExists: !fresh,
		MemTableSize:     o.MemTableSize,
		// Pebble's default exits the process on a checksum failure; the
		// read that met it returns an error too, which raft reports.
		EventListener: &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
			log.Error("raft log corruption", "file", info.Path, "err", info.Details)
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("raftlog: open %s: %w", o.Dir, err)
	}
	return db, nil
}

// fsOrDisk is o.FS, or the disk when it is nil.
func fsOrDisk(fs vfs.FS) vfs.FS {
	if fs == nil {
		return vfs.Default
	}
	return fs
}
