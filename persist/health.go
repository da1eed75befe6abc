package persist

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Pebble treats a failed write to its log or manifest as fatal: it stops
// the process (its Logger.Fatalf), or, for a write it learns of later,
// panics with its commit pipeline locked, so the database can be neither
// used nor closed afterwards. A full disk must not do that to sluice: quota
// writes should be refused while it lasts and resume on their own once
// space is freed.
//
// So Pebble never sees a write fail. Its file system (healthFS) retries a
// failed write, create, rename or directory creation until it succeeds,
// with a growing pause; while any operation is retrying, the store's
// health is the error it met, quota writes are refused with it (Store.Err)
// and replies waiting for durability are released with it. When the retry
// succeeds (space was freed) the health clears and Pebble carries on where
// it was, having lost nothing it acknowledged.
//
// A failed fsync is different: after one, Linux may have dropped the dirty
// pages it could not write, so a later successful fsync proves nothing.
// The health then stays failed (quota writes refused) until restart, and
// the sync never returns to Pebble.
//
// While the store opens, and once it is closing, operations fail at once
// instead (failFast): a store that cannot open must say so rather than
// wait, and shutdown must not hang on a full disk.

// retryPause bounds the pause between retries of a failed operation.
const (
	firstRetryPause = 10 * time.Millisecond
	maxRetryPause   = time.Second
)

// health is the quota store's disk state.
type health struct {
	log *slog.Logger
	// failFast makes operations return their errors instead of retrying.
	failFast atomic.Bool

	mu sync.Mutex
	// err is the current fault, nil when every operation succeeds;
	// retrying counts operations retrying now; sticky says a failed fsync
	// set err, which then stays.
	err      error
	retrying int
	sticky   bool
	// changed is closed and replaced whenever err changes.
	changed chan struct{}
	// stop would end the retries and a failed sync's wait; nothing closes
	// it: a store closing with a fault leaves them to the process's exit
	// (Store.unlessFault).
	stop chan struct{}

	faults atomic.Int64
}

func newHealth(log *slog.Logger) *health {
	return &health{log: log, changed: make(chan struct{}), stop: make(chan struct{})}
}

// Err is the current fault wrapped in ErrJournal, or nil.
func (h *health) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// watch returns a channel closed when the fault changes, and the current
// fault.
func (h *health) watch() (<-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed, h.err
}

func (h *health) setLocked(err error) {
	h.err = err
	close(h.changed)
	h.changed = make(chan struct{})
}

// retry runs op until it succeeds, recording a fault while it fails.
func (h *health) retry(what, path string, op func() error) error {
	err := op()
	if err == nil || h.failFast.Load() || !diskFault(err) {
		return err
	}
	h.faults.Add(1)
	h.mu.Lock()
	h.retrying++
	if h.err == nil {
		h.setLocked(fmt.Errorf("%w: %s %s: %w", ErrJournal, what, path, err))
		h.log.Error("quota store cannot write; quota writes are refused until it can (retrying)",
			"op", what, "file", path, "err", err)
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.retrying--
		if h.retrying == 0 && h.err != nil && !h.sticky && err == nil {
			h.setLocked(nil)
			h.log.Warn("quota store writes again; quota writes are accepted", "op", what, "file", path)
		}
		h.mu.Unlock()
	}()
	pause := firstRetryPause
	for {
		select {
		case <-h.stop:
			return err
		case <-time.After(pause):
		}
		if err = op(); err == nil {
			return nil
		}
		pause = min(2*pause, maxRetryPause)
	}
}

// syncFailed records a failed fsync: the store stays failed until restart,
// and the sync does not return until the store gives up.
func (h *health) syncFailed(path string, err error) error {
	if h.failFast.Load() {
		return err
	}
	h.faults.Add(1)
	h.mu.Lock()
	if !h.sticky {
		h.sticky = true
		h.setLocked(fmt.Errorf("%w: fsync %s: %w (restart sluice once the disk is fixed)", ErrJournal, path, err))
		h.log.Error("quota store fsync failed; quota writes are refused until restart", "file", path, "err", err)
	}
	h.mu.Unlock()
	<-h.stop
	return err
}
