package cluster

import (
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// With --raft-log-sync interval:<d>, raft-wal's segment files are synced on
// a timer instead of on every append: an append is acknowledged once it is
// in the operating system's cache on a majority, and reaches their disks
// within the interval. A process that dies (SIGKILL, a crash) loses
// nothing, since the cache outlives it; only a majority of machines losing
// power within one interval can lose what they acknowledged — the model of
// NATS JetStream and Kafka, which lean on replicas rather than fsync. The
// stable store (term, vote) is not a segment file and stays synced on
// every write: a node must never vote twice in a term.

// intervalFS is raft-wal's file system with segment syncs deferred to a
// timer.
type intervalFS struct {
	types.VFS
	log   *slog.Logger
	mu    sync.Mutex
	dirty map[*intervalFile]bool
	stop  chan struct{}
	done  chan struct{}
}

func newIntervalFS(every time.Duration, log *slog.Logger) *intervalFS {
	v := &intervalFS{VFS: fs.New(), log: log, dirty: map[*intervalFile]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go v.run(every)
	return v
}

func (v *intervalFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &intervalFile{WritableFile: f, fs: v}, nil
}

func (v *intervalFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &intervalFile{WritableFile: f, fs: v}, nil
}

// run syncs the files written since the last round, every interval, and
// once more when the store closes.
func (v *intervalFS) run(every time.Duration) {
	defer close(v.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			v.syncDirty()
		case <-v.stop:
			v.syncDirty()
			return
		}
	}
}

func (v *intervalFS) syncDirty() {
	v.mu.Lock()
	files := make([]*intervalFile, 0, len(v.dirty))
	for f := range v.dirty {
		files = append(files, f)
	}
	clear(v.dirty)
	v.mu.Unlock()
	for _, f := range files {
		if err := f.WritableFile.Sync(); err != nil {
			v.log.Error("raft log: a deferred sync failed; the log is durable only in the operating system's cache", "err", err)
		}
	}
}

// Close stops the timer after a last sync.
func (v *intervalFS) Close() error {
	select {
	case <-v.stop:
	default:
		close(v.stop)
	}
	<-v.done
	return nil
}

// intervalFile defers Sync to its file system's timer.
type intervalFile struct {
	types.WritableFile
	fs *intervalFS
}

func (f *intervalFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.dirty[f] = true
	f.fs.mu.Unlock()
	return nil
}

// Close syncs what the file holds before closing it: a sealed segment is
// on disk whatever the timer.
func (f *intervalFile) Close() error {
	f.fs.mu.Lock()
	delete(f.fs.dirty, f)
	f.fs.mu.Unlock()
	err := f.WritableFile.Sync()
	if cerr := f.WritableFile.Close(); err == nil {
		err = cerr
	}
	return err
}
