package persist

import (
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// healthFS is the quota store's file system: writes that fail on a disk
// fault are retried until they succeed, and the store's health reports the
// fault meanwhile (see health.go). Reads pass through.
type healthFS struct {
	vfs.FS
	h *health
}

func (fs healthFS) wrap(f vfs.File, name string) vfs.File {
	if f == nil {
		return nil
	}
	return &healthFile{File: f, name: name, h: fs.h}
}

func (fs healthFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	var f vfs.File
	err := fs.h.retry("create", name, func() (err error) {
		f, err = fs.FS.Create(name, category)
		return err
	})
	return fs.wrap(f, name), err
}

func (fs healthFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	return fs.wrap(f, name), err
}

func (fs healthFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	return fs.wrap(f, name), err
}

func (fs healthFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	var f vfs.File
	err := fs.h.retry("reuse", newname, func() (err error) {
		f, err = fs.FS.ReuseForWrite(oldname, newname, category)
		return err
	})
	return fs.wrap(f, newname), err
}

func (fs healthFS) Link(oldname, newname string) error {
	return fs.h.retry("link", newname, func() error { return fs.FS.Link(oldname, newname) })
}

func (fs healthFS) Rename(oldname, newname string) error {
	return fs.h.retry("rename", newname, func() error { return fs.FS.Rename(oldname, newname) })
}

func (fs healthFS) MkdirAll(dir string, perm os.FileMode) error {
	return fs.h.retry("mkdir", dir, func() error { return fs.FS.MkdirAll(dir, perm) })
}

func (fs healthFS) Unwrap() vfs.FS { return fs.FS }

// healthFile retries the writes of one file.
type healthFile struct {
	vfs.File
	name string
	h    *health
}

func (f *healthFile) Write(p []byte) (int, error) {
	n := 0
	err := f.h.retry("write", f.name, func() error {
		m, err := f.File.Write(p[n:])
		n += m
		return err
	})
	return n, err
}

func (f *healthFile) WriteAt(p []byte, off int64) (int, error) {
	n := 0
	err := f.h.retry("write", f.name, func() error {
		m, err := f.File.WriteAt(p[n:], off+int64(n))
		n += m
		return err
	})
	return n, err
}

// Preallocate is advice: Pebble ignores its failure, and so do retries.

func (f *healthFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return f.h.syncFailed(f.name, err)
	}
	return nil
}

func (f *healthFile) SyncData() error {
	if err := f.File.SyncData(); err != nil {
		return f.h.syncFailed(f.name, err)
	}
	return nil
}

func (f *healthFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if err != nil {
		return full, f.h.syncFailed(f.name, err)
	}
	return full, nil
}
