package keyspace

import (
	"fmt"
	"sync"
	"testing"
)

// FlushAll empties every slot, runs its callback with every slot locked,
// and leaves the keyspace usable.
func TestFlushAll(t *testing.T) {
	ks := New()
	for i := range 1000 {
		key := []byte(fmt.Sprintf("k%d", i))
		s, _ := ks.LockKey(key), int64(1)
		if _, err := s.Insert(key, KindGCRA, 100, nil); err != nil {
			t.Fatal(err)
		}
		s.Unlock()
	}
	called := false
	ks.FlushAll(func(func(int) *Slot) {
		called = true
		// Every slot is held: TryLock on any must fail.
		for _, slot := range []int{0, 5000, 16383} {
			if ks.slots[slot].mu.TryLock() {
				t.Errorf("slot %d not locked during the callback", slot)
			}
		}
	})
	if !called {
		t.Fatal("callback not called")
	}
	if n := ks.Stats().Keys; n != 0 {
		t.Fatalf("%d keys after FlushAll", n)
	}
	s, now := ks.LockKey([]byte("k1")), int64(2)
	if _, ok := s.Get([]byte("k1"), now); ok {
		t.Fatal("k1 survived")
	}
	if _, err := s.Insert([]byte("k1"), KindGCRA, 100, nil); err != nil {
		t.Fatal(err)
	}
	s.Unlock()
}

// Commands locking one slot at a time never deadlock against FlushAll.
func TestFlushAllConcurrent(t *testing.T) {
	ks := New()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				key := []byte(fmt.Sprintf("g%d-%d", g, i))
				s, now := ks.LockKey(key), int64(1)
				if _, ok := s.Get(key, now); !ok {
					s.Insert(key, KindGCRA, 100, nil)
				}
				s.Unlock()
			}
		}()
	}
	for range 20 {
		ks.FlushAll(nil)
	}
	wg.Wait()
}
