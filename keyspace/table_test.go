package keyspace

import (
	"bytes"
	"fmt"
	"testing"
)

// TestTableWidensAndNarrows fills one slot past tagLimit bytes of records,
// moving some records (a state that outgrows its room) on the way over,
// so the index drops its tags; then deletes most keys so a compaction
// brings the arena under the limit and the tags back. Every key must be
// found with its state at each stage.
func TestTableWidensAndNarrows(t *testing.T) {
	ks := New()
	s := ks.Lock(7)
	defer s.Unlock()
	const stateLen = 200
	state := func(i, v int) []byte {
		b := bytes.Repeat([]byte{byte(i), byte(v)}, stateLen/2)
		if v%2 == 1 {
			b = append(b, 'x', 'y', 'z') // past the slack: the record moves
		}
		return b
	}
	model := map[string]int{} // key → version of its state
	check := func(stage string) {
		t.Helper()
		if s.Len() != len(model) {
			t.Fatalf("%s: slot holds %d keys, model %d", stage, s.Len(), len(model))
		}
		for k, v := range model {
			var i int
			fmt.Sscanf(k, "k%d", &i)
			e, ok := s.Get([]byte(k), 0)
			if !ok || !bytes.Equal(s.State(e), state(i, v)) {
				t.Fatalf("%s: %s found=%v, state wrong", stage, k, ok)
			}
		}
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%d", i)) }
	n := 0
	for len(s.t.arena) < tagLimit-64<<10 {
		if _, err := s.InsertState(key(n), KindSlidingCounter, 0, state(n, 0)); err != nil {
			t.Fatal(err)
		}
		model[string(key(n))] = 0
		n++
	}
	if s.t.wide {
		t.Fatalf("table wide at %d arena bytes, under the limit", len(s.t.arena))
	}
	check("tagged")
	// Move records until the arena passes the limit.
	for i := 0; !s.t.wide; i = (i + 1) % n {
		e, ok := s.Get(key(i), 0)
		if !ok {
			t.Fatalf("k%d lost", i)
		}
		v := model[string(key(i))] + 1
		if _, err := s.SetState(e, state(i, v)); err != nil {
			t.Fatal(err)
		}
		model[string(key(i))] = v
		if i == n-1 && len(s.t.arena) < tagLimit {
			t.Fatal("a pass over every key left the arena under the limit")
		}
	}
	check("widened")
	for i := n; i < n+1000; i++ {
		if _, err := s.InsertState(key(i), KindSlidingCounter, 0, state(i, 0)); err != nil {
			t.Fatal(err)
		}
		model[string(key(i))] = 0
	}
	n += 1000
	check("wide, after inserts")
	for i := range n {
		if i%4 != 0 {
			e, _ := s.Get(key(i), 0)
			s.Delete(e)
			delete(model, string(key(i)))
		}
	}
	if s.t.wide || len(s.t.arena) > tagLimit {
		t.Fatalf("after deleting 3 of 4 keys: wide=%v, arena %d bytes", s.t.wide, len(s.t.arena))
	}
	check("narrowed")
}
