//go:build !unix

package persist

import (
	"errors"
	"syscall"
)

// diskFault reports whether err is the disk refusing a write.
func diskFault(err error) bool { return errors.Is(err, syscall.ENOSPC) }
