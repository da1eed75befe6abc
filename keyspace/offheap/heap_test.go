package offheap

import (
	"math/rand/v2"
	"sync"
	"testing"
)

func TestClassesBoundRounding(t *testing.T) {
	h := New()
	defer h.Close()
	for n := 1; n <= 4*MaxSmall; n += 7 {
		c := h.ClassSize(n)
		if c < n {
			t.Fatalf("ClassSize(%d) = %d", n, c)
		}
		if n > 128 && n <= MaxSmall && (c-n)*8 > n || n <= 128 && c-n >= 16 {
			t.Fatalf("ClassSize(%d) = %d: too much slack", n, c)
		}
		if n > MaxSmall && c-n >= h.PageSize() {
			t.Fatalf("ClassSize(%d) = %d: more than a page of slack", n, c)
		}
		if c%16 != 0 {
			t.Fatalf("ClassSize(%d) = %d is not 16-aligned", n, c)
		}
	}
}

// TestRandomAgainstReference allocates and frees blocks of random sizes,
// filling each with its own pattern, and checks that no block is changed
// by another's use and that the accounting returns to zero.
func TestRandomAgainstReference(t *testing.T) {
	h := New()
	defer h.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	type block struct {
		b    []byte
		fill byte
	}
	var live []block
	check := func(bl block) {
		for i, c := range bl.b[:cap(bl.b)] {
			if c != bl.fill {
				t.Fatalf("block of %d bytes: byte %d is %d, want %d", cap(bl.b), i, c, bl.fill)
			}
		}
	}
	for step := range 20000 {
		if len(live) > 0 && rng.IntN(100) < 45 {
			i := rng.IntN(len(live))
			check(live[i])
			h.Free(live[i].b)
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			if limit := max(MinGiveBack, h.stats.Allocated/16); h.idle > limit {
				t.Fatalf("step %d: %d idle bytes held, over %d", step, h.idle, limit)
			}
			continue
		}
		n := 1 + rng.IntN(256)
		switch rng.IntN(20) {
		case 0:
			n = 1 + rng.IntN(MaxSmall)
		case 1:
			n = MaxSmall + 1 + rng.IntN(3*MaxSmall)
		}
		b, err := h.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != n || cap(b) != h.ClassSize(n) {
			t.Fatalf("Alloc(%d): len %d cap %d, want cap %d", n, len(b), cap(b), h.ClassSize(n))
		}
		b = b[:cap(b)]
		bl := block{b: b, fill: byte(step) | 1}
		for i := range b {
			b[i] = bl.fill
		}
		live = append(live, bl)
	}
	var want int64
	for _, bl := range live {
		check(bl)
		want += int64(cap(bl.b))
	}
	if got := h.Stats().Allocated; got != want {
		t.Fatalf("Allocated = %d, want %d", got, want)
	}
	for _, bl := range live {
		h.Free(bl.b)
	}
	h.GiveBack()
	st := h.Stats()
	if st.Allocated != 0 {
		t.Fatalf("after freeing everything: %+v", st)
	}
	if st.Held != 0 {
		t.Fatalf("after freeing everything %d bytes held", st.Held)
	}
}

// TestScatteredBlocksHoldOnlyTheirPages: a class tables grew through keeps
// a few blocks spread over many spans; only their pages stay held.
func TestScatteredBlocksHoldOnlyTheirPages(t *testing.T) {
	h := New()
	defer h.Close()
	page := h.PageSize()
	var blocks [][]byte
	for range 4 * spanSize / 1024 {
		b, err := h.Alloc(1024)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b)
	}
	kept := 0
	for i, b := range blocks {
		if i%64 == 0 {
			kept++
			continue
		}
		h.Free(b)
	}
	h.GiveBack()
	if held := h.Stats().Held; held != int64(kept*page) {
		t.Fatalf("held %d with %d blocks of 1024 kept, want %d (one page each)", held, kept, kept*page)
	}
}

func TestEmptySpansGoBack(t *testing.T) {
	h := New()
	defer h.Close()
	var blocks [][]byte
	for range 3 * spanSize / 1024 {
		b, err := h.Alloc(1024)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b)
	}
	if held := h.Stats().Held; held != 3*spanSize {
		t.Fatalf("held %d, want %d", held, 3*spanSize)
	}
	for _, b := range blocks {
		h.Free(b)
	}
	if held := h.Stats().Held; held > MinGiveBack {
		t.Fatalf("after freeing: held %d, want at most %d", held, MinGiveBack)
	}
	h.GiveBack()
	if held := h.Stats().Held; held != 0 {
		t.Fatalf("after freeing: held %d, want 0", held)
	}
	// A span given back serves another class.
	b, err := h.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	if m := h.Stats().Mapped; m != regionSize {
		t.Fatalf("mapped %d, want one region", m)
	}
	h.Free(b)
}

func TestLargeBlocksUnmap(t *testing.T) {
	h := New()
	defer h.Close()
	b, err := h.Alloc(5 * MaxSmall)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] = 1
	if st := h.Stats(); st.Allocated != int64(cap(b)) || st.Mapped != int64(cap(b)) {
		t.Fatalf("%+v", st)
	}
	h.Free(b)
	if st := h.Stats(); st != (Stats{}) {
		t.Fatalf("after free: %+v", st)
	}
}

func TestBadFreePanics(t *testing.T) {
	h := New()
	defer h.Close()
	b, _ := h.Alloc(64)
	keep, _ := h.Alloc(64) // keeps the span in use
	h.Free(b)
	for name, f := range map[string]func(){
		"double":  func() { h.Free(b) },
		"foreign": func() { h.Free(make([]byte, 64)) },
		"inside":  func() { h.Free(keep[8:]) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s free did not panic", name)
				}
			}()
			f()
		}()
	}
	h.Free(keep)
}

func TestClose(t *testing.T) {
	h := New()
	if _, err := h.Alloc(10); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Alloc(2 * MaxSmall); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Alloc(10); err == nil {
		t.Fatal("Alloc after Close succeeded")
	}
	if st := h.Stats(); st != (Stats{}) {
		t.Fatalf("after Close: %+v", st)
	}
}

func BenchmarkAllocFree(b *testing.B) {
	h := New()
	defer h.Close()
	for i := 0; b.Loop(); i++ {
		x, _ := h.Alloc(16 + i%2000)
		h.Free(x)
	}
}

// TestConcurrentUse: slots allocate and free under their own locks, so the
// heap is used from many goroutines at once; each keeps its blocks intact.
func TestConcurrentUse(t *testing.T) {
	h := New()
	defer h.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			var mine [][]byte
			for step := range 3000 {
				if len(mine) > 0 && rng.IntN(2) == 0 {
					i := rng.IntN(len(mine))
					for _, c := range mine[i] {
						if c != byte(g) {
							t.Errorf("goroutine %d: block changed under it", g)
							return
						}
					}
					h.Free(mine[i])
					mine[i] = mine[len(mine)-1]
					mine = mine[:len(mine)-1]
					continue
				}
				n := 1 + rng.IntN(4096)
				if step%100 == 0 {
					n = MaxSmall + rng.IntN(MaxSmall)
				}
				b, err := h.Alloc(n)
				if err != nil {
					t.Error(err)
					return
				}
				for i := range b {
					b[i] = byte(g)
				}
				mine = append(mine, b)
			}
			for _, b := range mine {
				h.Free(b)
			}
		}()
	}
	wg.Wait()
	if st := h.Stats(); st.Allocated != 0 {
		t.Fatalf("after every goroutine freed its blocks: %+v", st)
	}
}
