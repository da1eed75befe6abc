package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// launch runs sluice with args until it is ready or exits. started says
// it is serving (the caller must kill it); out is what it printed.
func launch(t *testing.T, addr string, args ...string) (cmd *exec.Cmd, started bool, out func() string) {
	t.Helper()
	cmd = exec.Command(binary, append([]string{"--addr", addr}, args...)...)
	var mu sync.Mutex
	var b strings.Builder
	out = func() string { mu.Lock(); defer mu.Unlock(); return b.String() }
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, exited := make(chan struct{}), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			mu.Lock()
			b.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if !once && strings.Contains(sc.Text(), "sluice ready") {
				once = true
				close(ready)
			}
		}
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	select {
	case <-ready:
		return cmd, true, out
	case <-exited:
		return cmd, false, out
	case <-time.After(30 * time.Second):
		t.Fatalf("sluice neither ready nor exited after 30s:\n%s", out())
	}
	return
}

// flipBytes inverts two bytes of file at fraction f of its length.
func flipBytes(t *testing.T, path string, f float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := int(float64(len(b)) * f)
	if i+1 >= len(b) {
		t.Fatalf("%s has %d bytes", path, len(b))
	}
	b[i] ^= 0xff
	b[i+1] ^= 0x5a
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// storeFiles lists the quota store's files ending in ext.
func storeFiles(t *testing.T, dataDir, ext string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dataDir, "quotas", "*"+ext))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range m {
		if fi, err := os.Stat(p); err == nil && fi.Size() > 0 {
			out = append(out, p)
		}
	}
	return out
}

// Damage to the quota store anywhere but a crash's torn tail never starts
// the server with part of its quotas: startup refuses, naming what is
// damaged, or, when it starts, serves every acknowledged unit. Then
// --rebuild-quota-store brings back the snapshot's quotas, loudly.
func TestDamagedQuotaStoreNeverStartsPartially(t *testing.T) {
	type damage struct {
		name    string
		flushed bool // restart once first, so the data is in sstables
		do      func(t *testing.T, dataDir string)
	}
	flipLog := func(f float64) func(*testing.T, string) {
		return func(t *testing.T, d string) {
			logs := storeFiles(t, d, ".log")
			if len(logs) == 0 {
				t.Fatal("no WAL")
			}
			flipBytes(t, logs[len(logs)-1], f)
		}
	}
	cases := []damage{
		{"wal-25%", false, flipLog(0.25)},
		{"wal-50%", false, flipLog(0.5)},
		{"wal-75%", false, flipLog(0.75)},
		{"wal-emptied", false, func(t *testing.T, d string) {
			for _, p := range storeFiles(t, d, ".log") {
				if err := os.Truncate(p, 0); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"sstable-50%", true, func(t *testing.T, d string) {
			ssts := storeFiles(t, d, ".sst")
			if len(ssts) == 0 {
				t.Fatal("no sstable")
			}
			for _, p := range ssts {
				flipBytes(t, p, 0.5)
			}
		}},
		{"store-deleted", false, func(t *testing.T, d string) {
			if err := os.RemoveAll(filepath.Join(d, "quotas")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := StartServer(t, "--quota-fsync", "always", "--snapshot-interval", "0")
			c := s.Client()
			setClock(t, c, future)
			used := map[string]int64{}
			check := func(n int) {
				for i := range n {
					k := fmt.Sprintf("acct:%d", i%7)
					if r := ints(t, c.Do(ctx(t), "QUOTA.CHECK", k, 1_000_000, "YEAR", "COST", 3)); r[0] != 0 {
						t.Fatalf("refused %v", r)
					}
					used[k] += 3
				}
			}
			check(150)
			if err := c.Save(ctx(t)).Err(); err != nil {
				t.Fatal(err)
			}
			saved := map[string]int64{}
			for k, v := range used {
				saved[k] = v
			}
			check(200)
			if tc.flushed {
				s.Stop()
				s.Start()
			}
			s.Kill()
			tc.do(t, s.DataDir)

			addr := freeAddr(t)
			cmd, started, out := launch(t, addr, "--data-dir", s.DataDir, "--enable-debug-command")
			if started {
				c := redis.NewClient(&redis.Options{Addr: addr})
				defer c.Close()
				setClock(t, c, future)
				for k, want := range used {
					if got := quotaUsed(t, c, k); got != want {
						t.Fatalf("started with %s at %d units of %d acknowledged:\n%s", k, got, want, out())
					}
				}
				cmd.Process.Kill()
				return
			}
			if !strings.Contains(out(), filepath.Join(s.DataDir, "quotas")) {
				t.Fatalf("the refusal does not name the quota store:\n%s", out())
			}
			t.Logf("refused: %s", strings.TrimSpace(out()))

			addr = freeAddr(t)
			_, started, out = launch(t, addr, "--data-dir", s.DataDir, "--enable-debug-command", "--rebuild-quota-store")
			if !started {
				t.Fatalf("--rebuild-quota-store did not start:\n%s", out())
			}
			c2 := redis.NewClient(&redis.Options{Addr: addr})
			defer c2.Close()
			setClock(t, c2, future)
			for k, want := range saved {
				if got := quotaUsed(t, c2, k); got < want {
					t.Errorf("rebuilt %s at %d units, the snapshot had %d", k, got, want)
				}
			}
			if tc.name != "store-deleted" && !strings.Contains(out(), "REBUILDING the quota store") {
				t.Errorf("no loud log line for the rebuild:\n%s", out())
			}
		})
	}
}
