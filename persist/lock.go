package persist

import (
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// LockFile, in the data directory, is held locked by the process serving
// it and names that process: two servers on one directory would each
// overwrite the other's snapshots and corrupt the quota store.
const LockFile = "sluice.pid"

// lockDataDir takes the data directory's lock, or says which process holds
// it. On the disk it is an advisory lock (flock) that the kernel releases
// when the process dies, so a crash never leaves a stale lock; another file
// system (tests' vfs.NewMem) uses its own Lock.
func lockDataDir(fs vfs.FS, dir string) (io.Closer, error) {
	path := fs.PathJoin(dir, LockFile)
	if fs == vfs.Default {
		return lockPIDFile(path, dir)
	}
	l, err := fs.Lock(path)
	if err != nil {
		return nil, &DirInUseError{Dir: dir, PID: "unknown", Err: err}
	}
	return l, nil
}

// DirInUseError says another process serves the data directory; it is
// ErrDirInUse.
type DirInUseError struct {
	Dir string
	// PID is the holder's process id as its lock file records it, or
	// "unknown".
	PID string
	// Err is the locking error.
	Err error
}

func (e *DirInUseError) Error() string {
	return fmt.Sprintf("persist: data directory %s is in use by another sluice process (pid %s)", e.Dir, e.PID)
}

// Is makes errors.Is(err, ErrDirInUse) hold.
func (e *DirInUseError) Is(target error) bool { return target == ErrDirInUse }

func (e *DirInUseError) Unwrap() error { return e.Err }
