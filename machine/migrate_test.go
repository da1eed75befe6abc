package machine

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/slot"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/quota"
)

// journalLog is a Durability that records what it is told.
type journalLog struct{ lines []string }

func (j *journalLog) QuotaChanged(key []byte, _ *quota.State) Ticket {
	j.lines = append(j.lines, "quota "+string(key))
	return Ticket{}
}

func (j *journalLog) RecordChanged(key []byte, kind keyspace.Kind, _ int64, _ []byte) Ticket {
	j.lines = append(j.lines, "set "+KindName(kind)+" "+string(key))
	return Ticket{}
}

func (j *journalLog) QuotaDeleted(key []byte) Ticket {
	j.lines = append(j.lines, "del "+string(key))
	return Ticket{}
}

func (j *journalLog) Flushed() Ticket { j.lines = append(j.lines, "flush"); return Ticket{} }

// count is how many lines start with prefix.
func (j *journalLog) count(prefix string) int {
	n := 0
	for _, l := range j.lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// snapshotCopy moves every record of m into a new machine as a snapshot
// moves it (AppendState, DecodeState, StoreState, then Restore); seen, when
// set, gets each record's kind and encoding.
func snapshotCopy(t *testing.T, m *Machine, seen func(kind keyspace.Kind, enc []byte)) *Machine {
	t.Helper()
	restored := New(Options{})
	for i := range slot.Count {
		s := m.keys.Lock(i)
		s.Keys(m.Applied(), func(key []byte, e keyspace.Entry) bool {
			b, err := AppendState(nil, s, e)
			if err != nil {
				t.Fatalf("%q: %v", key, err)
			}
			if seen != nil {
				seen(e.Kind(), b)
			}
			obj, err := DecodeState(e.Kind(), b, quota.LoadZone)
			if err != nil {
				t.Fatalf("%q: %v", key, err)
			}
			r := restored.keys.LockKey(key)
			err = StoreState(r, key, e.Kind(), s.Word(e), obj)
			r.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			return true
		})
		s.Unlock()
	}
	restored.Restore(m.Applied())
	return restored
}

// An override and a scale an older version stored under the hashed tag of
// a braced domain are found after a restore: they move to the domain's own
// slot, apply to RL.CHECK, and the move is journaled.
func TestRestoreMovesLegacyDomainRecords(t *testing.T) {
	const domain = "a{b}c"
	rules := "domain: \"" + domain + "\"\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD", "r.yaml", rules)
	if got := do(m, t0, "RL.OVERRIDE", "SET", domain, "4", "minute", "DESCRIPTOR", "user", "u"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := do(m, t0, "RL.SCALE", "SET", domain, "0.5"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	// Put both records back where an older version kept them.
	legacy := map[string]string{}
	for _, k := range allKeys(m) {
		if !strings.HasSuffix(k, "#override") && !strings.HasSuffix(k, "#scale") {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(domain))
		rest := k[strings.Index(k, ":"+domain)+1+len(domain):]
		old := fmt.Sprintf("rl:{h%016x}%d:%s%s", h.Sum64(), len(domain), domain, rest)
		moveRecord(t, m, k, old)
		legacy[old] = k
	}
	if len(legacy) != 2 {
		t.Fatalf("records: %q", legacy)
	}
	if got := five(t, do(m, t0, "RL.CHECK", domain, "DESCRIPTOR", "user", "u")); !strings.HasPrefix(got, "0 10 9 ") {
		t.Fatalf("records under their legacy keys are not read: %s", got)
	}
	m.Restore(m.Applied())
	j := &journalLog{}
	m.SetDurability(j)
	// 4 a minute, halved: 2, of which the first check took 1.
	if got := five(t, do(m, t0, "RL.CHECK", domain, "DESCRIPTOR", "user", "u")); !strings.HasPrefix(got, "0 2 0 ") {
		t.Fatalf("after the restore the moved override and scale apply: %s", got)
	}
	for old, now := range legacy {
		kind := KindName(keyspace.KindOverride)
		if strings.HasSuffix(now, "#scale") {
			kind = KindName(keyspace.KindScale)
		}
		if !slices.Contains(j.lines, "del "+old) || !slices.Contains(j.lines, "set "+kind+" "+now) {
			t.Errorf("the move of %q to %q is not journaled: %q", old, now, j.lines)
		}
	}
	if keys := allKeys(m); slices.ContainsFunc(keys, func(k string) bool { return legacy[k] != "" }) {
		t.Errorf("a legacy key is left: %q", keys)
	}
	// Restoring again moves nothing.
	j.lines = nil
	m.Restore(m.Applied())
	if len(j.lines) != 0 {
		t.Errorf("a second restore journaled %q", j.lines)
	}
}

func allKeys(m *Machine) []string {
	var keys []string
	for i := range slot.Count {
		s := m.keys.Lock(i)
		s.Keys(m.Applied(), func(key []byte, _ keyspace.Entry) bool {
			keys = append(keys, string(key))
			return true
		})
		s.Unlock()
	}
	return keys
}

// moveRecord moves the record at from to the key to, as a restore of
// another layout would have put it.
func moveRecord(t *testing.T, m *Machine, from, to string) {
	t.Helper()
	now := m.Applied()
	s := m.keys.LockKey([]byte(from))
	e, ok := s.Get([]byte(from), now)
	if !ok {
		s.Unlock()
		t.Fatalf("no record at %q", from)
	}
	kind, word, obj := e.Kind(), s.Word(e), s.Object(e)
	s.Delete(e)
	s.Unlock()
	s = m.keys.LockKey([]byte(to))
	defer s.Unlock()
	if _, err := s.Insert([]byte(to), kind, word, obj); err != nil {
		t.Fatal(err)
	}
}
