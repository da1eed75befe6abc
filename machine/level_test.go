package machine

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
)

// atLevel logs SLUICE.LEVEL l, as a group's leader does once every voter
// supports l.
func atLevel(m *Machine, l int) {
	do(m, t0, "SLUICE.LEVEL", strconv.Itoa(l))
}

// The log's level starts at 0, rises by SLUICE.LEVEL and never falls; a
// level this binary does not know is refused before the log; the record
// is internal, and a restore reads it back.
func TestLevelRisesNeverFalls(t *testing.T) {
	m := New(Options{})
	if m.AppliedLevel() != 0 {
		t.Fatalf("a new log at level %d", m.AppliedLevel())
	}
	for _, bad := range []string{"0", "2", "-1", "x"} {
		if got := m.Check([][]byte{[]byte("SLUICE.LEVEL"), []byte(bad)}); !strings.HasPrefix(got, "ERR the apply level") {
			t.Errorf("SLUICE.LEVEL %s: %q, want refused", bad, got)
		}
	}
	if got := do(m, t0, "SLUICE.LEVEL", "1"); got != "+OK\r\n" || m.AppliedLevel() != 1 {
		t.Fatalf("SLUICE.LEVEL 1: %q, level %d", got, m.AppliedLevel())
	}
	if got := do(m, t0, "SLUICE.LEVEL", "1"); got != "+OK\r\n" || m.AppliedLevel() != 1 {
		t.Fatalf("again: %q, level %d", got, m.AppliedLevel())
	}
	if got := do(m, t0, "TYPE", LevelKey); got != "+none\r\n" {
		t.Fatalf("TYPE %s: %q: the record is internal", LevelKey, got)
	}
	// A restore reads the level from the record (as a snapshot moves it).
	restored := New(Options{})
	key := []byte(LevelKey)
	s := m.keys.LockKey(key)
	e, ok := s.Get(key, t0)
	if !ok || e.Kind() != keyspace.KindLevel {
		t.Fatalf("no level record")
	}
	enc, err := AppendState(nil, s, e)
	s.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	obj, err := DecodeState(keyspace.KindLevel, enc, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := restored.keys.LockKey(key)
	if err := StoreState(r, key, keyspace.KindLevel, 0, obj); err != nil {
		t.Fatal(err)
	}
	r.Unlock()
	restored.Restore(m.Applied())
	if restored.AppliedLevel() != 1 {
		t.Fatalf("restored at level %d", restored.AppliedLevel())
	}
	// A single node's level is set, not stored: an empty node stays empty.
	alone := New(Options{})
	alone.SetLevelAlone(Level)
	if alone.AppliedLevel() != Level || alone.Keys().Stats().Keys != 0 {
		t.Fatalf("alone: level %d, %d keys", alone.AppliedLevel(), alone.Keys().Stats().Keys)
	}
}

// The level is the log's configuration: FLUSHALL keeps its record, so a
// member restored from a snapshot taken after a flush applies at the
// level the others do; a single node's (no record) stays as set.
func TestLevelSurvivesFlushAll(t *testing.T) {
	m := New(Options{})
	atLevel(m, 1)
	do(m, t0, "CL.THROTTLE", "k", "5", "1", "60")
	if got := do(m, t0+1, "FLUSHALL"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := snapshotCopy(t, m, nil).AppliedLevel(); got != 1 {
		t.Fatalf("restored after FLUSHALL at level %d", got)
	}
	alone := New(Options{})
	alone.SetLevelAlone(Level)
	do(alone, t0, "FLUSHALL")
	if alone.AppliedLevel() != Level || alone.Keys().Stats().Keys != 0 {
		t.Fatalf("alone after FLUSHALL: level %d, %d keys", alone.AppliedLevel(), alone.Keys().Stats().Keys)
	}
}

// Below level 1 a log is applied as sluice 0.4.0 applied it — a member of
// that release beside this one in a group being upgraded applies every
// entry alike: a settled reservation's id is not kept (a late copy of its
// reserve charges), a lease's grant is a reservation's record and reads
// the scale from its counter's slot, a unit multiplier is refused. The
// log raised to level 1 afterwards: the new behaviour, and a grant made
// before is still returned.
func TestLevelZeroAppliesAsTheRelease(t *testing.T) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "llm.yaml", reserveRules)
	reserve := []string{"RL.RESERVE", "llm", "req-1", "60", "COST", "40", "DESCRIPTOR", "fixed", "a"}
	if got := do(m, t0, reserve...); !strings.HasPrefix(got, "*7\r\n:0\r\n") {
		t.Fatalf("reserve: %q", got)
	}
	do(m, t0+1, "RL.SETTLE", "llm", "req-1", "15")
	if st := m.Keys().Stats(); st.Kinds[keyspace.KindReservationPart] != 0 {
		t.Fatalf("level 0: a settled id's mark kept (%d records), which 0.4.0 does not keep", st.Kinds[keyspace.KindReservationPart])
	}
	if got := do(m, t0+2, reserve...); !strings.HasPrefix(got, "*7\r\n:0\r\n") {
		t.Fatalf("level 0: a late copy of the reserve: %q, want it charged as 0.4.0 did", got)
	}

	l := New(Options{})
	do(l, t0, "RL.RULES", "LOAD", "edge.yaml", leaseRules)
	do(l, t0, "RL.SCALE", "SET", "edge", "0.5")
	if got := leased(t, l, t0, "h1", 80, "fixed"); got != "80 10000 8000" {
		t.Fatalf("level 0: a lease of 80 under a scale of 0.5 of 100: %s, want 0.4.0's 80", got)
	}
	if st := l.Keys().Stats(); st.Kinds[keyspace.KindReservation] != 1 || st.Kinds[keyspace.KindLease] != 0 {
		t.Fatalf("level 0: a grant of kind %v, want a reservation's", st.Kinds)
	}
	if got := do(l, t0, "RL.LEASE", "edge", "h1", "10", "WANT", "80", "WITHGRANT", "DESCRIPTOR", "fixed", "a"); !strings.Contains(got, "needs every member of the group at sluice 0.5.0") {
		t.Fatalf("level 0: WITHGRANT: %q, want refused", got)
	}
	if got := do(l, t0, "RL.LEASE", "RETURN", "edge", "h1", "UNUSED", "80", "GRANT", "1", "DESCRIPTOR", "fixed", "a"); !strings.Contains(got, "needs every member of the group at sluice 0.5.0") {
		t.Fatalf("level 0: GRANT: %q, want refused", got)
	}
	atLevel(l, Level)
	// A grant made below level 1 has no id: WITHGRANT names 0, and a
	// return naming any id is not of it.
	if got := do(l, t0+1, "RL.LEASE", "edge", "h1", "10", "WANT", "80", "WITHGRANT", "DESCRIPTOR", "fixed", "a"); !strings.HasPrefix(got, "*4\r\n:80\r\n") || !strings.HasSuffix(got, ":0\r\n") {
		t.Fatalf("level 1, a grant of level 0 with WITHGRANT: %q, want its 80 and id 0", got)
	}
	if got := do(l, t0+1, "RL.LEASE", "RETURN", "edge", "h1", "UNUSED", "80", "GRANT", strconv.FormatInt(t0, 10), "DESCRIPTOR", "fixed", "a"); got != "$-1\r\n" && got != "_\r\n" {
		t.Fatalf("level 1, a grant of level 0 returned by an id: %q, want nothing", got)
	}
	if got := do(l, t0+1, "RL.LEASE", "RETURN", "edge", "h1", "UNUSED", "90", "DESCRIPTOR", "fixed", "a"); !strings.HasPrefix(got, "-ERR UNUSED 90 is more than the lease granted (80)") {
		t.Fatalf("level 1, a grant of level 0 returned past it: %q", got)
	}
	if got := do(l, t0+1, "RL.LEASE", "RETURN", "edge", "h1", "UNUSED", "80", "DESCRIPTOR", "fixed", "a"); !strings.HasPrefix(got, "*") {
		t.Fatalf("level 1, a grant of level 0 returned: %q", got)
	}
	// The scaled 50, shared with h1, whose demand of 80 still counts.
	if got := leased(t, l, t0+2, "h2", 80, "fixed"); !strings.HasPrefix(got, "25 ") {
		t.Fatalf("level 1: a lease of 80 under a scale of 0.5 of 100, h1's demand of 80 beside it: %s, want 25", got)
	}
	if st := l.Keys().Stats(); st.Kinds[keyspace.KindLease] != 1 {
		t.Fatalf("level 1: grants of kinds %v, want one of its own", st.Kinds)
	}

	// Commands this release adds answer only from level 1: a member of
	// 0.4.0 does not know them.
	g := New(Options{})
	if got := do(g, t0, "GCRA", "k", "1", "1", "1"); !strings.Contains(got, "needs every member of the group at sluice 0.5.0") {
		t.Fatalf("level 0: GCRA: %q", got)
	}
	if got := do(g, t0, "RL.SHARE", "edge", "h", "2", "USED", "0", "ASKED", "1", "OVER", "1", "DESCRIPTOR", "fixed", "a"); !strings.Contains(got, "needs every member of the group at sluice 0.5.0") {
		t.Fatalf("level 0: RL.SHARE: %q", got)
	}
	if g.Keys().Stats().Keys != 0 {
		t.Fatal("level 0: a refused command stored something")
	}
	atLevel(g, Level)
	if got := do(g, t0, "GCRA", "k", "1", "1", "1"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
		t.Fatalf("level 1: GCRA: %q", got)
	}

	r := loadRLS(t)
	if got := rls(t, r, t0, "another", 1, "limit:1/second*30:key2=c"); !strings.Contains(got, "needs every member of the group at sluice 0.5.0") {
		t.Fatalf("level 0: a unit multiplier: %s", got)
	}
}
