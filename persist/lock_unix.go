//go:build unix

package persist

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockPIDFile locks path with flock and writes this process's id into it.
// When another process holds it, the error names that process's id.
func lockPIDFile(path, dir string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("persist: lock data directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := io.ReadAll(io.LimitReader(f, 32))
			pid := strings.TrimSpace(string(b))
			if _, perr := strconv.Atoi(pid); perr != nil {
				pid = "unknown"
			}
			return nil, &DirInUseError{Dir: dir, PID: pid, Err: err}
		}
		return nil, fmt.Errorf("persist: lock data directory %s: %w", dir, err)
	}
	// The lock is held; the id is for the error above and for operators.
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("persist: lock data directory %s: write %s: %w", dir, path, err)
	}
	return f, nil
}
