package tests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOffHeapMemoryComesBack: keys take off-heap memory that INFO memory
// reports, and it goes back when the keys go, by FLUSHALL or by expiry.
func TestOffHeapMemoryComesBack(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	memory := func() map[string]int64 {
		info, err := c.Info(ctx(t), "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		for _, line := range strings.Split(info, "\r\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					m[k] = n
				}
			}
		}
		return m
	}
	offheap := func() int64 { return memory()["used_memory_offheap"] }
	fill := func(n int) {
		p := c.Pipeline()
		for i := range n {
			// One request per minute: each key lives a minute.
			p.Do(ctx(t), "CL.THROTTLE", fmt.Sprintf("key:%012d", i), 0, 1, 60)
		}
		if _, err := p.Exec(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	const keys = 20_000
	if got := offheap(); got != 0 {
		t.Fatalf("empty server: used_memory_offheap %d", got)
	}
	fill(keys)
	full := offheap()
	// 20k records of 26 bytes plus their index, with bounded slack.
	if full < keys*26 || full > keys*26*3 {
		t.Fatalf("%d keys: used_memory_offheap %d", keys, full)
	}
	m := memory()
	if m["used_memory"] != m["used_memory_heap"]+m["used_memory_offheap"] {
		t.Fatalf("used_memory is not heap + off-heap: %v", m)
	}
	if m["used_memory_offheap_held"] < m["used_memory_offheap"] || m["used_memory_rss"] < m["used_memory_offheap_held"] {
		t.Fatalf("want used_memory_rss >= used_memory_offheap_held >= used_memory_offheap: %v", m)
	}
	if err := c.Do(ctx(t), "FLUSHALL").Err(); err != nil {
		t.Fatal(err)
	}
	if got := offheap(); got != 0 {
		t.Fatalf("after FLUSHALL: used_memory_offheap %d", got)
	}

	fill(keys)
	advance(t, c, 2*time.Minute)
	// What stays held is bounded by the batch pages are given back in
	// (offheap.MinGiveBack).
	eventually(t, "expired keys give their off-heap memory back", func() bool {
		m := memory()
		return m["used_memory_offheap"] == 0 && m["used_memory_offheap_held"] <= 256<<10
	})
}
