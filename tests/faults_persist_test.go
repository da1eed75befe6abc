package tests

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// smallDisk mounts a 48 MB tmpfs for the test and returns its path; the
// test is skipped unless it runs as root where mount works.
func smallDisk(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount -t tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system is full, and returns
// its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			break
		}
	}
	// Take the last scraps too.
	for _, n := range []int{4096, 512, 1} {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// A full disk refuses quota writes with a clear error, keeps every other
// command working and every acknowledged change, and heals by itself once
// space is freed.
func TestDiskFullRefusesQuotaWritesAndRecovers(t *testing.T) {
	for _, fsync := range []string{"always", "everysec", "no"} {
		t.Run(fsync, func(t *testing.T) {
			disk := smallDisk(t)
			s := StartServer(t, "--quota-fsync", fsync, "--snapshot-interval", "0")
			s.Kill()
			s.DataDir = filepath.Join(disk, "data")
			s.Args = []string{"--enable-debug-command", "--data-dir", s.DataDir, "--quota-fsync", fsync, "--snapshot-interval", "0"}
			s.Start()
			c := s.Client()
			setClock(t, c, future)
			acked := int64(0)
			for range 20 {
				ints(t, c.Do(ctx(t), "QUOTA.CHECK", "acct", 1_000_000, "MONTH"))
				acked++
			}
			// Pebble preallocates its log on the first write (35 MB, which a
			// full disk then still has room in): restart, so the disk fills
			// up before the new log's first write.
			s.Stop()
			s.Start()
			// No retries: a dropped connection must not pass for an answer.
			c = s.Client(func(o *redis.Options) { o.MaxRetries = -1 })
			setClock(t, c, future)
			filler := fillDisk(t, disk)

			// Quota writes fail with the promised error, soon; nothing crashes.
			var last error
			eventually(t, "a quota write refused on a full disk", func() bool {
				r, err := c.Do(ctx(t), "QUOTA.CHECK", "acct", 1_000_000, "MONTH").Result()
				if err == nil {
					if arr, ok := r.([]any); ok && arr[0] == int64(0) {
						acked++
					}
					return false
				}
				last = err
				return true
			})
			if !strings.HasPrefix(last.Error(), "ERR quota changes cannot be written to disk: ") {
				t.Fatalf("quota write on a full disk: %v", last)
			}
			// Everything else keeps working.
			if r := ints(t, c.Do(ctx(t), "CL.THROTTLE", "g", 5, 10, 60)); r[0] != 0 {
				t.Errorf("CL.THROTTLE on a full disk: %v", r)
			}
			if err := c.Ping(ctx(t)).Err(); err != nil {
				t.Errorf("PING on a full disk: %v", err)
			}
			if got := quotaUsed(t, c, "acct"); got < acked {
				t.Errorf("QUOTA.GET on a full disk: used %d, %d acknowledged", got, acked)
			}
			if got := infoField(t, c, "persistence", "sluice_quota_status"); got != "err" {
				t.Errorf("sluice_quota_status %q on a full disk", got)
			}

			// Space comes back: so does the service, by itself.
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			eventually(t, "quota writes accepted again after space was freed", func() bool {
				err := c.Do(ctx(t), "QUOTA.CHECK", "acct", 1_000_000, "MONTH").Err()
				if err == nil {
					acked++
				}
				return err == nil
			})
			for range 5 {
				ints(t, c.Do(ctx(t), "QUOTA.CHECK", "acct", 1_000_000, "MONTH"))
				acked++
			}
			used := quotaUsed(t, c, "acct")
			s.Stop()
			s.Start()
			c = s.Client()
			if got := quotaUsed(t, c, "acct"); got != used || got < acked {
				t.Fatalf("after restart: used %d, before %d, acknowledged %d\n%s", got, used, acked, s.Logs())
			}
		})
	}
}

// Starting on a full disk is one clear refusal naming the directory and
// the cause, not a flood of errors or a hang.
func TestStartOnFullDiskRefuses(t *testing.T) {
	disk := smallDisk(t)
	dir := filepath.Join(disk, "data")
	s := StartServer(t)
	s.Kill()
	s.DataDir = dir
	s.Args = []string{"--enable-debug-command", "--data-dir", dir}
	s.Start()
	c := s.Client()
	for i := range 50 {
		ints(t, c.Do(ctx(t), "QUOTA.CHECK", "acct", 1_000_000, "MONTH"))
		ints(t, c.Do(ctx(t), "CL.THROTTLE", i, 5, 10, 60))
	}
	s.Kill()
	fillDisk(t, disk)
	for range 2 {
		out, err := startMustFail(t, "--addr", freeAddr(t), "--data-dir", dir)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("exit %v:\n%s", err, out)
		}
		if !strings.Contains(out, dir) || !strings.Contains(out, "no space left on device") {
			t.Errorf("the refusal does not name %s and the cause:\n%s", dir, out)
		}
		if n := strings.Count(out, "\n"); n > 5 || strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
			t.Errorf("%d lines instead of one refusal:\n%.3000s", n, out)
		}
	}
}

// A second server on a data directory in use is refused, naming the
// process that serves it.
func TestSecondServerOnSameDataDirRefuses(t *testing.T) {
	s := StartServer(t)
	out, err := startMustFail(t, "--addr", freeAddr(t), "--data-dir", s.DataDir)
	want := "data directory " + s.DataDir + " is in use by another sluice process (pid " + strconv.Itoa(s.cmd.Process.Pid) + ")"
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("second server: %v\n%s\nwant %q", err, out, want)
	}
	if err := s.Client().Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("the first server stopped answering: %v", err)
	}
}

// What a crash during BGSAVE leaves is removed at startup; flags are
// checked before the data directory is created.
func TestStartupCleansLeftoversAndValidatesFirst(t *testing.T) {
	s := StartServer(t)
	s.Kill()
	tmp := filepath.Join(s.DataDir, "snapshot.sluice.tmp")
	if err := os.WriteFile(tmp, []byte("half a snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Start()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("%s after startup: %v", tmp, err)
	}

	fresh := filepath.Join(t.TempDir(), "never")
	for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1"} {
		out, err := startMustFail(t, "--addr", addr, "--data-dir", fresh)
		if err == nil || !strings.Contains(out, addr) {
			t.Errorf("--addr %s: %v\n%s", addr, err, out)
		}
		if _, err := os.Stat(fresh); !os.IsNotExist(err) {
			t.Fatalf("--addr %s created the data directory: %v", addr, err)
		}
	}
}

// Under --quota-fsync no, a crash right after SAVE answered OK keeps the
// quotas the snapshot holds (startup used to prefer the quota store's
// copy, which had not reached the disk).
func TestCrashAfterSaveKeepsQuotas(t *testing.T) {
	s := StartServer(t, "--quota-fsync", "no")
	c := s.Client()
	setClock(t, c, future)
	for range 5 {
		ints(t, c.Do(ctx(t), "QUOTA.CHECK", "acct", 100, "MONTH"))
	}
	if err := c.Save(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Start()
	c = s.Client()
	setClock(t, c, future)
	if got := quotaUsed(t, c, "acct"); got != 5 {
		t.Fatalf("after SAVE and kill -9: used %d, want 5\n%s", got, s.Logs())
	}
}
