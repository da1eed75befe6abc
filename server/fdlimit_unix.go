//go:build unix

package server

import (
	"errors"
	"os"
	"syscall"
)

// fitOpenFiles raises the soft open-files limit toward want, as far as the
// hard limit allows, and returns the soft limit in force and the hard one.
func fitOpenFiles(want uint64) (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	if rl.Cur >= want || rl.Cur >= rl.Max {
		return rl.Cur, rl.Max, nil
	}
	raised := rl
	raised.Cur = min(want, rl.Max)
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
		return raised.Cur, rl.Max, nil
	}
	return rl.Cur, rl.Max, nil
}

// isFDExhausted reports an Accept that failed for want of descriptors.
func isFDExhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// reserveFD is a descriptor held so that one can be freed when the
// process runs out: to accept a client just to refuse it.
type reserveFD struct{ f *os.File }

func openReserveFD() reserveFD {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return reserveFD{}
	}
	return reserveFD{f}
}

// Close frees the descriptor; false when none was held.
func (r reserveFD) Close() bool {
	if r.f == nil {
		return false
	}
	r.f.Close()
	return true
}
