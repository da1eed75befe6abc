package persist

import (
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// gateFS is a file system whose file syncs block while its gate is
// closed: a disk whose fsync takes as long as the test wants, so tests can
// hold the journal writer or a snapshot inside a sync deterministically.
type gateFS struct {
	vfs.FS
	mu      sync.Mutex
	cond    sync.Cond
	closed  bool
	blocked int
	syncs   int
}

func newGateFS(fs vfs.FS) *gateFS {
	g := &gateFS{FS: fs}
	g.cond.L = &g.mu
	return g
}

func (g *gateFS) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

func (g *gateFS) open() {
	g.mu.Lock()
	g.closed = false
	g.cond.Broadcast()
	g.mu.Unlock()
}

// waitBlocked waits until a sync is held at the gate.
func (g *gateFS) waitBlocked(t testing.TB) {
	t.Helper()
	waitFor(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.blocked > 0
	})
}

func (g *gateFS) pass() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.syncs++
	for g.closed {
		g.blocked++
		g.cond.Wait()
		g.blocked--
	}
}

func (g *gateFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, c)
	return g.wrap(f, err)
}

func (g *gateFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(old, name, c)
	return g.wrap(f, err)
}

func (g *gateFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := g.FS.OpenReadWrite(name, c, opts...)
	return g.wrap(f, err)
}

func (g *gateFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &gateFile{File: f, g: g}, nil
}

type gateFile struct {
	vfs.File
	g *gateFS
}

func (f *gateFile) Sync() error { f.g.pass(); return f.File.Sync() }

func (f *gateFile) SyncData() error { f.g.pass(); return f.File.SyncData() }

func (f *gateFile) SyncTo(n int64) (bool, error) { f.g.pass(); return f.File.SyncTo(n) }
