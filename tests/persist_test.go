package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func quotaUsed(t *testing.T, c *redis.Client, key string) int64 {
	t.Helper()
	cmd := c.Do(ctx(t), "QUOTA.GET", key)
	if cmd.Err() == redis.Nil {
		return 0
	}
	return ints(t, cmd)[0]
}

// With --quota-fsync always, every acknowledged QUOTA.CHECK survives
// kill -9, and concurrent clients share fsyncs.
func TestCrashAlwaysKeepsEveryAcknowledgedCheck(t *testing.T) {
	s := StartServer(t, "--quota-fsync", "always")
	c := s.Client(func(o *redis.Options) { o.PoolSize = 16 })
	setClock(t, c, future)
	const clients, each = 16, 40
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				r := ints(t, c.Do(ctx(t), "QUOTA.CHECK", "acct", 1_000_000, "MONTH"))
				if r[0] != 0 {
					t.Errorf("refused: %v", r)
				}
			}
		}()
	}
	wg.Wait()
	fsyncs, _ := strconv.Atoi(infoField(t, c, "persistence", "sluice_quota_fsyncs"))
	t.Logf("%d fsyncs for %d checks", fsyncs, clients*each)
	if fsyncs >= clients*each {
		t.Errorf("%d fsyncs for %d concurrent checks: no group commit", fsyncs, clients*each)
	}
	if got := infoField(t, c, "persistence", "sluice_quota_fsync"); got != "always" {
		t.Errorf("sluice_quota_fsync %q", got)
	}
	s.Kill()
	s.Start()
	c = s.Client()
	if got := quotaUsed(t, c, "acct"); got != clients*each {
		t.Fatalf("QUOTA.GET after kill -9: used %d, want %d", got, clients*each)
	}
	if !strings.Contains(s.Logs(), "loaded state") || !strings.Contains(s.Logs(), "quota_keys=1") {
		t.Fatalf("startup log does not say what it loaded:\n%s", s.Logs())
	}
}

// With everysec, kill -9 loses at most what was acknowledged in the last
// second or two.
func TestCrashEverySecLosesAtMostTheLastSeconds(t *testing.T) {
	s := StartServer(t) // everysec is the default
	c := s.Client()
	setClock(t, c, future)
	var acked []time.Time
	start := time.Now()
	for time.Since(start) < 2500*time.Millisecond {
		ints(t, c.Do(ctx(t), "QUOTA.CHECK", "acct", 1_000_000_000, "YEAR"))
		acked = append(acked, time.Now())
	}
	killed := time.Now()
	s.Kill()
	s.Start()
	got := quotaUsed(t, s.Client(), "acct")
	safe := 0 // acknowledged more than two seconds before the crash
	for _, at := range acked {
		if killed.Sub(at) > 2*time.Second {
			safe++
		}
	}
	t.Logf("%d acknowledged, %d of them >2s before kill -9, %d survived", len(acked), safe, got)
	if got > int64(len(acked)) || got < int64(safe) || safe == 0 {
		t.Fatalf("used %d after the crash; want between %d and %d", got, safe, len(acked))
	}
}

// DEL of a quota key and FLUSHALL are durable like quota changes.
func TestCrashKeepsDeletesAndFlush(t *testing.T) {
	s := StartServer(t, "--quota-fsync", "always")
	c := s.Client()
	setClock(t, c, future)
	for _, k := range []string{"a", "b", "c"} {
		ints(t, c.Do(ctx(t), "QUOTA.CHECK", k, 10, "DAY"))
	}
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "g", 10, 1, 60))
	if err := c.Do(ctx(t), "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	c.Del(ctx(t), "a")
	s.Kill()
	s.Start()
	c = s.Client()
	if n := c.Exists(ctx(t), "a", "b", "c", "g").Val(); n != 3 {
		t.Fatalf("%d of b, c, g exist after DEL a and a crash (a: %d)", n, c.Exists(ctx(t), "a").Val())
	}
	c.FlushAll(ctx(t))
	setClock(t, c, future)
	ints(t, c.Do(ctx(t), "QUOTA.CHECK", "d", 10, "DAY"))
	s.Kill()
	s.Start()
	c = s.Client()
	keys := c.Keys(ctx(t), "*").Val()
	if len(keys) != 1 || keys[0] != "d" {
		t.Fatalf("keys after FLUSHALL, one check and a crash: %v; want [d]", keys)
	}
}

// A graceful restart keeps every limiter's state exactly: the same probes
// at the same instant answer the same before and after.
func TestGracefulRestartKeepsEveryKind(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	at := future + 17*int64(time.Second)
	setClock(t, c, at)
	for range 4 {
		ints(t, c.Do(ctx(t), "CL.THROTTLE", "gcra", 5, 10, 60))
		ints(t, c.Do(ctx(t), "SW.CHECK", "sw", 10, 60, "COST", 2))
		ints(t, c.Do(ctx(t), "SW.CHECK", "swx", 10, 60, "EXACT"))
		ints(t, c.Do(ctx(t), "FW.CHECK", "fw", 10, 60))
		ints(t, c.Do(ctx(t), "QUOTA.CHECK", "quota", 100, "MONTH", "ANCHOR", 4102444800+86400*3))
		advance(t, c, 1500*time.Millisecond)
	}
	ints(t, c.Do(ctx(t), "CONC.ACQUIRE", "conc", 3, 30, "req-1"))
	ints(t, c.Do(ctx(t), "CONC.ACQUIRE", "conc", 3, 45, "req-2"))
	at = future + 30*int64(time.Second)
	setClock(t, c, at)
	probes := [][]any{
		{"CL.THROTTLE", "gcra", 5, 10, 60, 0},
		{"GET", "gcra"},
		{"SW.CHECK", "sw", 10, 60, "COST", 0},
		{"SW.CHECK", "swx", 10, 60, "EXACT", "COST", 0},
		{"FW.CHECK", "fw", 10, 60, "COST", 0},
		{"CONC.GET", "conc"},
		{"QUOTA.GET", "quota"},
		{"PTTL", "gcra"}, {"PTTL", "sw"}, {"PTTL", "swx"}, {"PTTL", "fw"}, {"PTTL", "conc"}, {"PTTL", "quota"},
		{"DBSIZE"},
	}
	probe := func() []string {
		var out []string
		for _, p := range probes {
			v, err := c.Do(ctx(t), p...).Result()
			out = append(out, fmt.Sprintf("%v => %v %v", p, v, err))
		}
		return out
	}
	before := probe()
	t.Logf("probes: %q", before)
	s.Stop()
	s.Start()
	c = s.Client()
	setClock(t, c, at)
	after := probe()
	for i := range before {
		if before[i] != after[i] {
			t.Errorf("changed by the restart:\n before %s\n  after %s", before[i], after[i])
		}
	}
	if t.Failed() {
		t.Logf("server log:\n%s", s.Logs())
	}
}

func TestSaveCommands(t *testing.T) {
	s := StartServer(t, "--snapshot-interval", "0")
	c := s.Client()
	setClock(t, c, future)
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "g", 10, 1, 60))
	if n := infoField(t, c, "persistence", "rdb_changes_since_last_save"); n != "1" {
		t.Errorf("rdb_changes_since_last_save %s, want 1", n)
	}
	if err := c.Save(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	if last := c.LastSave(ctx(t)).Val(); last != future/1e9 {
		t.Errorf("LASTSAVE %d, want %d", last, future/1e9)
	}
	for field, want := range map[string]string{
		"rdb_changes_since_last_save": "0", "rdb_last_bgsave_status": "ok", "sluice_snapshot_keys": "1",
		"rdb_last_save_time": strconv.FormatInt(future/1e9, 10), "loading": "0", "sluice_quota_fsync": "everysec",
		"sluice_snapshot_file": filepath.Join(s.DataDir, "snapshot.sluice"), "sluice_snapshot_interval_sec": "0",
	} {
		if got := infoField(t, c, "persistence", field); got != want {
			t.Errorf("INFO %s = %q, want %q", field, got, want)
		}
	}
	if st, err := c.BgSave(ctx(t)).Result(); err != nil || st != "Background saving started" {
		t.Fatalf("BGSAVE = %q, %v", st, err)
	}
	if err := c.Do(ctx(t), "BGSAVE", "NOW").Err(); err == nil || err.Error() != "ERR syntax error" {
		t.Fatalf("BGSAVE NOW: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, "snapshot.sluice")); err != nil {
		t.Fatal(err)
	}
}

// A corrupted or missing data file stops startup with an error naming it:
// sluice never starts empty over data it cannot read.
func TestUnreadableDataRefusesToStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// damage breaks the data dir and returns the path the error must name
		damage func(t *testing.T, dir string) string
		want   string
	}{
		{"flipped snapshot byte", func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "snapshot.sluice")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}, "corrupt"},
		{"snapshot deleted", func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "snapshot.sluice")
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			return path
		}, "missing"},
		{"quota store manifest garbage", func(t *testing.T, dir string) string {
			manifests, _ := filepath.Glob(filepath.Join(dir, "quotas", "MANIFEST-*"))
			if len(manifests) == 0 {
				t.Fatal("no MANIFEST in the quota store")
			}
			for _, m := range manifests {
				if err := os.WriteFile(m, []byte("garbage"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return filepath.Join(dir, "quotas")
		}, "quota store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StartServer(t)
			c := s.Client()
			ints(t, c.Do(ctx(t), "CL.THROTTLE", "g", 10, 1, 60))
			ints(t, c.Do(ctx(t), "QUOTA.CHECK", "q", 10, "DAY"))
			s.Stop()
			path := tc.damage(t, s.DataDir)
			out, err := startMustFail(t, "--addr", freeAddr(t), "--data-dir", s.DataDir)
			if err == nil || !strings.Contains(out, path) || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %v, output %q: want an error naming %s", err, out, path)
			}
		})
	}
}
