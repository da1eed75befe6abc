// Package hot finds the most frequent keys in a stream with bounded memory:
// the Space-Saving algorithm (Metwally, Agrawal, El Abbadi, 2005) over a
// recent window made of two epochs. Each epoch keeps at most Capacity
// counters; a key not counted takes the place of the smallest counter and
// inherits its count as a possible overestimate. A key seen more than
// N/Capacity times in an epoch of N offers is always kept, and its count is
// at most N/Capacity above the truth, never below.
//
// Time is a parameter: callers pass the instant of each offer.
package hot

import (
	"container/heap"
	"sort"
	"sync"
)

// Config configures a Sketch.
type Config struct {
	// Capacity is the counters per epoch (default 1024). Memory is about
	// Capacity × (key length + 64 bytes) per epoch.
	Capacity int
	// Window is the epoch length in ns (default 60 s): a report covers the
	// current epoch and the one before, so between one and two windows.
	Window int64
}

// Validate fills defaults and checks the values.
func (c *Config) Validate() error {
	if c.Capacity == 0 {
		c.Capacity = 1024
	}
	if c.Window == 0 {
		c.Window = 60e9
	}
	if c.Capacity < 1 || c.Window < 1 {
		return errInvalid
	}
	return nil
}

type constError string

func (e constError) Error() string { return string(e) }

const errInvalid = constError("hot: capacity and window must be positive")

// Sketch is safe for concurrent use.
type Sketch struct {
	cfg       Config
	mu        sync.Mutex
	cur, prev *epoch
	start     int64 // when cur began
}

// New is an empty sketch.
func New(cfg Config) (*Sketch, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sketch{cfg: cfg, cur: newEpoch(cfg.Capacity), prev: newEpoch(cfg.Capacity)}, nil
}

// Offer counts one occurrence of key at instant now.
func (s *Sketch) Offer(key []byte, now int64) {
	s.mu.Lock()
	s.rotate(now)
	s.cur.offer(key)
	s.mu.Unlock()
}

func (s *Sketch) rotate(now int64) {
	switch {
	case now-s.start >= 2*s.cfg.Window:
		s.prev.reset()
		s.cur.reset()
		s.start = now
	case now-s.start >= s.cfg.Window:
		s.prev, s.cur = s.cur, s.prev
		s.cur.reset()
		s.start += s.cfg.Window
	}
}

// Count is one key's estimated occurrences and the most its count may
// exceed the truth by.
type Count struct {
	Key        string
	Count, Err int64
}

// Top returns the n most frequent keys of the window at now, most first
// (ties by key).
func (s *Sketch) Top(n int, now int64) []Count {
	s.mu.Lock()
	s.rotate(now)
	merged := map[string]Count{}
	for _, e := range []*epoch{s.prev, s.cur} {
		for _, c := range e.items {
			m := merged[c.key]
			m.Key, m.Count, m.Err = c.key, m.Count+c.count, m.Err+c.err
			merged[c.key] = m
		}
	}
	s.mu.Unlock()
	out := make([]Count, 0, len(merged))
	for _, c := range merged {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Key < out[j].Key
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// epoch is one Space-Saving summary: counters in a min-heap by count,
// indexed by key.
type epoch struct {
	capacity int
	index    map[string]*item
	items    minHeap
}

type item struct {
	key        string
	count, err int64
	pos        int
}

func newEpoch(capacity int) *epoch {
	return &epoch{capacity: capacity, index: make(map[string]*item, capacity)}
}

func (e *epoch) reset() {
	clear(e.index)
	e.items = e.items[:0]
}

func (e *epoch) offer(key []byte) {
	if it, ok := e.index[string(key)]; ok {
		it.count++
		heap.Fix(&e.items, it.pos)
		return
	}
	if len(e.items) < e.capacity {
		it := &item{key: string(key), count: 1}
		e.index[it.key] = it
		heap.Push(&e.items, it)
		return
	}
	// Replace the smallest counter: the new key may have been seen as many
	// times as it counted (its error), plus this once.
	it := e.items[0]
	delete(e.index, it.key)
	it.key, it.err = string(key), it.count
	it.count++
	e.index[it.key] = it
	heap.Fix(&e.items, 0)
}

type minHeap []*item

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i].count < h[j].count }
func (h minHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *minHeap) Push(x any) {
	it := x.(*item)
	it.pos = len(*h)
	*h = append(*h, it)
}
func (h *minHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
