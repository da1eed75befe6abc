package hot

import (
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"
)

// On a skewed (Zipf) trace the sketch reports the true top keys, each with
// a count no lower than the truth and at most N/Capacity above it.
func TestTopAgainstExactCounts(t *testing.T) {
	s, err := New(Config{Capacity: 256, Window: 1e12})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.2, 1, 100_000)
	exact := map[string]int64{}
	const n = 200_000
	for range n {
		k := "user:" + strconv.FormatUint(zipf.Uint64(), 10)
		exact[k]++
		s.Offer([]byte(k), 1)
	}
	type kv struct {
		k string
		n int64
	}
	var truth []kv
	for k, v := range exact {
		truth = append(truth, kv{k, v})
	}
	sort.Slice(truth, func(i, j int) bool { return truth[i].n > truth[j].n })
	top := s.Top(10, 1)
	bound := int64(n / 256)
	for i, c := range top {
		if c.Key != truth[i].k {
			t.Fatalf("rank %d: %s (%d), want %s (%d)", i, c.Key, c.Count, truth[i].k, truth[i].n)
		}
		if c.Count < truth[i].n || c.Count > truth[i].n+bound {
			t.Fatalf("%s: count %d, true %d, bound +%d", c.Key, c.Count, truth[i].n, bound)
		}
	}
}

// The window: counts older than two epochs are gone.
func TestWindow(t *testing.T) {
	s, _ := New(Config{Capacity: 4, Window: 10})
	s.Offer([]byte("a"), 0)
	s.Offer([]byte("a"), 5)
	s.Offer([]byte("b"), 12)
	if top := s.Top(5, 15); len(top) != 2 || top[0].Key != "a" || top[0].Count != 2 {
		t.Fatalf("within the window: %+v", top)
	}
	if top := s.Top(5, 25); len(top) != 1 || top[0].Key != "b" {
		t.Fatalf("a's epoch has passed: %+v", top)
	}
	if top := s.Top(5, 100); len(top) != 0 {
		t.Fatalf("long after: %+v", top)
	}
}
