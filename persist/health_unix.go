//go:build unix

package persist

import (
	"errors"
	"syscall"
)

// diskFault reports whether err is the disk refusing a write (full, over
// quota, failing, read-only), which waiting can cure, rather than a missing
// file or a bad argument, which it cannot.
func diskFault(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
