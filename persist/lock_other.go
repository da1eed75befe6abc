//go:build !unix

package persist

import (
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// lockPIDFile falls back to Pebble's lock where flock does not exist.
func lockPIDFile(path, dir string) (io.Closer, error) {
	l, err := vfs.Default.Lock(path)
	if err != nil {
		return nil, &DirInUseError{Dir: dir, PID: "unknown", Err: err}
	}
	return l, nil
}
