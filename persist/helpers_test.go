package persist

import (
	"bytes"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/conc"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/slot"
	"github.com/sluice-rl/sluice/window"
)

// t0 is 2024-05-17T10:00:00Z, the instant the tests start at.
const t0 = int64(1715940000) * 1e9

const dir = "/data"

// testClock is a settable clock.
type testClock struct{ ns atomic.Int64 }

func newClock(ns int64) *testClock {
	c := &testClock{}
	c.ns.Store(ns)
	return c
}

func (c *testClock) Now() int64 { return c.ns.Load() }

// openStore opens a store on fs at dir over ks; the test fails on error.
func openStore(t testing.TB, fs vfs.FS, policy FsyncPolicy, ks *keyspace.Keyspace, clk *testClock) *Store {
	t.Helper()
	st, err := tryOpen(fs, policy, ks, clk)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return st
}

func tryOpen(fs vfs.FS, policy FsyncPolicy, ks *keyspace.Keyspace, clk *testClock) (*Store, error) {
	return Open(Options{Dir: dir, QuotaFsync: policy, FS: fs}, Deps{Keys: ks, Now: clk.Now, Applied: clk.Now})
}

// keyDump is one key as the tests compare them.
type keyDump struct {
	Kind  keyspace.Kind
	Word  int64
	State string
}

// dump lists every live key of ks at now with its encoded state.
func dump(t testing.TB, ks *keyspace.Keyspace, now int64) map[string]keyDump {
	t.Helper()
	out := map[string]keyDump{}
	for i := range slot.Count {
		s, at := ks.Lock(i), now
		s.Keys(at, func(key []byte, e keyspace.Entry) bool {
			b, err := machine.AppendState(nil, s, e)
			if err != nil {
				t.Errorf("key %q: %v", key, err)
			}
			out[string(key)] = keyDump{e.Kind(), s.Word(e), string(b)}
			return true
		})
		s.Unlock()
	}
	return out
}

func sameKeys(t testing.TB, got, want map[string]keyDump) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	bad := 0
	for _, k := range keys {
		g, gok := got[k]
		w, wok := want[k]
		if gok != wok || g != w {
			if bad++; bad <= 10 {
				t.Errorf("key %q: got %+v (present %v), want %+v (present %v)", k, g, gok, w, wok)
			}
		}
	}
	if bad > 10 {
		t.Errorf("… %d keys differ", bad)
	}
}

// put inserts or replaces key in ks.
func put(t testing.TB, ks *keyspace.Keyspace, key string, kind keyspace.Kind, word int64, obj any) {
	t.Helper()
	if err := insert(ks, []byte(key), kind, word, obj); err != nil {
		t.Fatal(err)
	}
}

// fillEveryKind puts n keys of each kind into ks, states made by the
// algorithms themselves at now, and returns the quota keys' states.
func fillEveryKind(t testing.TB, ks *keyspace.Keyspace, n int, now int64) {
	t.Helper()
	params, err := window.NewParams(10, 60)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		put(t, ks, fmt.Sprintf("gcra:%d", i), keyspace.KindGCRA, now+int64(i+1)*1e9, nil)

		counter, _, exp, _, err := window.CounterState{}.Check(false, now, params, int64(1+i%5))
		mustOK(t, err)
		put(t, ks, fmt.Sprintf("sw:%d", i), keyspace.KindSlidingCounter, exp, &counter)

		lg, _, exp, _, err := window.LogState{}.Check(false, now, params, int64(1+i%7))
		mustOK(t, err)
		put(t, ks, fmt.Sprintf("log:%d", i), keyspace.KindSlidingLog, exp, &lg)

		fixed, _, exp, _, err := window.FixedState{}.Check(false, now, params, 2)
		mustOK(t, err)
		put(t, ks, fmt.Sprintf("fw:%d", i), keyspace.KindFixedWindow, exp, &fixed)

		l := new(conc.Leases)
		_, err = l.Acquire(now, 5, int64(30+i)*1e9, []byte(fmt.Sprintf("req-%d", i)))
		mustOK(t, err)
		put(t, ks, fmt.Sprintf("conc:%d", i), keyspace.KindLeases, l.ExpireAt(), l)

		q := quotaState(t, now, int64(100+i), int64(1+i%9), []string{"UTC", "Europe/Berlin", "America/New_York"}[i%3])
		put(t, ks, fmt.Sprintf("quota:%d", i), keyspace.KindQuota, q.ExpireAt(), q)
	}
}

// quotaState is a monthly quota's state after one admitted check.
func quotaState(t testing.TB, now, limit, cost int64, zone string) *quota.State {
	t.Helper()
	sch, err := quota.NewSchedule(quota.Month, t0-40*24*int64(time.Hour), true, zone)
	mustOK(t, err)
	st, store, _, err := quota.Check(quota.State{}, false, now, limit, sch, cost)
	mustOK(t, err)
	if !store {
		t.Fatalf("quota check at %d not admitted", now)
	}
	return &st
}

func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// readFile returns a file's bytes from fs.
func readFile(t testing.TB, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	mustOK(t, err)
	defer f.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(f)
	mustOK(t, err)
	return b.Bytes()
}

// writeFile replaces a file in fs.
func writeFile(t testing.TB, fs vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	mustOK(t, err)
	_, err = f.Write(bytes.Clone(data)) // vfs files may modify what they write
	mustOK(t, err)
	mustOK(t, f.Sync())
	mustOK(t, f.Close())
}
