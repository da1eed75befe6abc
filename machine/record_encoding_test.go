package machine

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/window"
)

// Window and quota keys hold the short record encodings in memory, while
// snapshots and DEBUG DIGEST see the snapshot encoding they always did (a
// replica of an older version agrees); a state moved through AppendState
// and StoreState, as a snapshot moves it, answers the same afterwards.
func TestRecordsKeepTheSnapshotEncoding(t *testing.T) {
	hour := int64(time.Hour)
	start := t0 - t0%hour
	m := New(Options{})
	do(m, t0, "SW.CHECK", "counter", "100", "3600")
	do(m, t0, "SW.CHECK", "counter", "100", "3600")
	do(m, t0, "FW.CHECK", "fixed", "100", "3600")
	do(m, t0, "QUOTA.CHECK", "quota", "100", "MONTH")
	anchorSec := (t0 - 40*int64(24*time.Hour) + int64(13*time.Hour)) / 1e9
	anchor := strconv.FormatInt(anchorSec, 10)
	do(m, t0, "QUOTA.CHECK", "billing", "1000", "MONTH", "ANCHOR", anchor, "TZ", "America/New_York", "COST", "7")
	want := map[string][]byte{
		"counter": window.CounterState{Window: hour, Start: start, Curr: 2}.AppendBinary(nil),
		"fixed":   window.FixedState{Window: hour, Start: start, Count: 1}.AppendBinary(nil),
		"quota":   quotaSnapshot(t, 100, 1, 0, false, "UTC"),
		"billing": quotaSnapshot(t, 1000, 7, anchorSec*1e9, true, "America/New_York"),
	}
	restored := New(Options{})
	for key, snap := range want {
		s := m.keys.LockKey([]byte(key))
		e, ok := s.Get([]byte(key), t0)
		if !ok {
			t.Fatalf("%s: not found", key)
		}
		got, err := AppendState(nil, s, e)
		if err != nil || !bytes.Equal(got, snap) {
			t.Errorf("%s: AppendState = %x, %v; want the snapshot encoding %x", key, got, err, snap)
		}
		if len(s.State(e)) >= len(snap) {
			t.Errorf("%s: record holds %d bytes, no fewer than the snapshot's %d", key, len(s.State(e)), len(snap))
		}
		kind, word := e.Kind(), s.Word(e)
		s.Unlock()

		obj, err := DecodeState(kind, got, quota.LoadZone)
		if err != nil {
			t.Fatal(err)
		}
		r := restored.keys.LockKey([]byte(key))
		if err := StoreState(r, []byte(key), kind, word, obj); err != nil {
			t.Fatal(err)
		}
		r.Unlock()
	}
	restored.Restore(m.Applied())
	d1, err1 := m.Digest()
	d2, err2 := restored.Digest()
	if err1 != nil || err2 != nil || d1 != d2 {
		t.Fatalf("digests %s (%v) and restored %s (%v)", d1, err1, d2, err2)
	}
	later := t0 + int64(time.Minute)
	for _, args := range [][]string{{"SW.CHECK", "counter", "100", "3600"}, {"FW.CHECK", "fixed", "100", "3600"},
		{"QUOTA.GET", "quota"}, {"QUOTA.CHECK", "billing", "1000", "MONTH", "ANCHOR", anchor, "TZ", "America/New_York"}} {
		if a, b := do(m, later, args...), do(restored, later, args...); a != b {
			t.Errorf("%v: %q, restored %q", args, a, b)
		}
	}
}

// quotaSnapshot is the snapshot encoding of a monthly quota at t0,
// built from its parameters (not from the record it is checked against).
func quotaSnapshot(t *testing.T, limit, used, anchor int64, anchored bool, zone string) []byte {
	t.Helper()
	sch, err := quota.NewSchedule(quota.Month, anchor, anchored, zone)
	if err != nil {
		t.Fatal(err)
	}
	start, end, err := sch.Bounds(t0)
	if err != nil {
		t.Fatal(err)
	}
	return quota.State{Schedule: sch, Limit: limit, Used: used, Start: start, End: end}.AppendBinary(nil)
}
