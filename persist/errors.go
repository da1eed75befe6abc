package persist

import "errors"

// Errors returned by this package. The command layer may print their text
// after "ERR "; errors about files are wrapped with the file's path.
var (
	// ErrOptions: an Options value that cannot work (see Options.Validate).
	ErrOptions = errors.New("persist: invalid options")
	// ErrNotSnapshot: the file does not start with the snapshot magic bytes.
	ErrNotSnapshot = errors.New("persist: not a sluice snapshot (bad magic bytes)")
	// ErrSnapshotVersion: the snapshot was written in a format version this
	// binary does not read (a newer sluice wrote it).
	ErrSnapshotVersion = errors.New("persist: unsupported snapshot format version")
	// ErrCorruptSnapshot: the snapshot is truncated, fails its checksum, or
	// holds a record that does not decode.
	ErrCorruptSnapshot = errors.New("persist: snapshot is corrupt")
	// ErrCorruptStore: the quota store holds a record that does not decode.
	ErrCorruptStore = errors.New("persist: quota store holds a corrupt record")
	// ErrMissingSnapshot: the quota store records that a snapshot was taken
	// but the snapshot file is gone; starting would silently lose the keys
	// it held.
	ErrMissingSnapshot = errors.New("persist: snapshot file is missing")
	// ErrMissingStore: the snapshot exists but the quota store it was
	// written beside is gone; starting would silently serve the snapshot's
	// stale quotas.
	ErrMissingStore = errors.New("persist: quota store is missing")
	// ErrStoreBehind: the quota store holds fewer changes than a snapshot
	// that was only complete once the store had them on disk: its log was
	// damaged or truncated, and starting would lose changes silently.
	ErrStoreBehind = errors.New("persist: quota store lost changes it had on disk")
	// ErrSaveInProgress: SAVE or BGSAVE while a background save runs.
	ErrSaveInProgress = errors.New("persist: Background save already in progress")
	// ErrJournal: a quota change could not be written to the quota store;
	// quota writes are refused from then on (the store is not durable).
	ErrJournal = errors.New("persist: quota changes cannot be written to disk")
	// ErrDirInUse: another process serves the data directory.
	ErrDirInUse = errors.New("persist: data directory in use")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("persist: store is closed")
	// ErrUnencodable: a key's state cannot be encoded (it is not of the
	// type its kind holds, or its encoder panicked: a bug in a command); a
	// snapshot leaves the key out, counts and logs it (SkippedKeysError).
	ErrUnencodable = errors.New("persist: key holds a state its kind cannot encode")
)

// storeError marks an error as the quota store's own (it cannot be opened
// or read, is missing or behind): the errors RebuildQuotaStore repairs by
// rebuilding the store from the snapshot. Its text is the wrapped error's.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

func storeFault(err error) error { return &storeError{err} }
