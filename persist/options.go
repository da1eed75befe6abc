package persist

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FsyncPolicy says when quota changes reach the disk, as Redis'
// appendfsync does for its AOF.
type FsyncPolicy uint8

// The policies; the zero value is invalid so a forgotten field is caught.
const (
	// FsyncAlways syncs every change before its reply is sent. Changes that
	// arrive while one sync runs share the next (group commit).
	FsyncAlways FsyncPolicy = iota + 1
	// FsyncEverySec syncs at most a second after a change.
	FsyncEverySec
	// FsyncNo never makes a request wait for the disk and syncs every
	// NoSyncInterval in the background, as an OS flushes dirty pages.
	FsyncNo
)

// NoSyncInterval is how often FsyncNo syncs what was written (Linux's
// default dirty-page write-back age).
const NoSyncInterval = 30 * time.Second

// ParseFsyncPolicy reads always, everysec or no.
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	for p := FsyncAlways; p <= FsyncNo; p++ {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: quota fsync %q: want always, everysec or no", ErrOptions, s)
}

// String is the flag spelling.
func (p FsyncPolicy) String() string {
	switch p {
	case FsyncAlways:
		return "always"
	case FsyncEverySec:
		return "everysec"
	case FsyncNo:
		return "no"
	}
	return fmt.Sprintf("FsyncPolicy(%d)", uint8(p))
}

// syncInterval is the longest a committed change waits for a sync; 0 means
// every commit syncs.
func (p FsyncPolicy) syncInterval() time.Duration {
	switch p {
	case FsyncEverySec:
		return time.Second
	case FsyncNo:
		return NoSyncInterval
	}
	return 0
}

// Options configure a Store.
type Options struct {
	// Dir is the data directory: the snapshot file and the quota store
	// live in it. It is created if missing.
	Dir string
	// QuotaFsync says when quota changes are synced to disk.
	QuotaFsync FsyncPolicy
	// SnapshotInterval is how often the whole keyspace is snapshotted when
	// something changed since the last snapshot; 0 snapshots only on SAVE,
	// BGSAVE and Close.
	SnapshotInterval time.Duration
	// FS is the file system; nil means the disk. Tests use vfs.NewMem().
	FS vfs.FS
	// RebuildQuotaStore rebuilds a quota store that is missing, damaged or
	// behind its snapshot (which startup refuses otherwise) from the
	// snapshot, moving the old one aside; quota changes made after the
	// snapshot are lost, and an ERROR log line says so. A sound store is
	// kept, so the option is safe to leave on.
	RebuildQuotaStore bool
}

// DefaultOptions are sluice's defaults: ./data, everysec, a snapshot a
// minute.
func DefaultOptions() Options {
	return Options{Dir: "./data", QuotaFsync: FsyncEverySec, SnapshotInterval: time.Minute}
}

// Validate reports the first option that cannot work.
func (o Options) Validate() error {
	if o.Dir == "" {
		return fmt.Errorf("%w: data dir is empty", ErrOptions)
	}
	if o.QuotaFsync < FsyncAlways || o.QuotaFsync > FsyncNo {
		return fmt.Errorf("%w: quota fsync %v: want always, everysec or no", ErrOptions, o.QuotaFsync)
	}
	if o.SnapshotInterval < 0 {
		return fmt.Errorf("%w: snapshot interval %v < 0", ErrOptions, o.SnapshotInterval)
	}
	return nil
}

// MarshalText writes the flag spelling, so a policy can be a flag.TextVar.
func (p FsyncPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads always, everysec or no.
func (p *FsyncPolicy) UnmarshalText(b []byte) error {
	v, err := ParseFsyncPolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}
