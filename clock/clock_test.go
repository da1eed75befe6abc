package clock

import (
	"errors"
	"math"
	"testing"
)

func TestMonotonic(t *testing.T) {
	readings := []int64{100, 50, 200, 199, 300}
	i := 0
	c := New(func() int64 { v := readings[i]; i++; return v })
	want := []int64{100, 100, 200, 200, 300}
	for j, w := range want {
		if got := c.Now(); got != w {
			t.Fatalf("reading %d: Now() = %d, want %d", j, got, w)
		}
	}
}

func TestFreezeAdvanceRelease(t *testing.T) {
	src := int64(1_000)
	c := New(func() int64 { return src })
	if err := c.Freeze(5_000); err != nil {
		t.Fatal(err)
	}
	if got := c.Now(); got != 5_000 {
		t.Fatalf("frozen Now() = %d, want 5000", got)
	}
	if got, err := c.Advance(250); got != 5_250 || err != nil {
		t.Fatalf("Advance = %d, %v, want 5250", got, err)
	}
	if err := c.Freeze(10); !errors.Is(err, ErrBackwards) {
		t.Fatalf("Freeze into the past: %v, want ErrBackwards", err)
	}
	if got := c.Now(); got != 5_250 {
		t.Fatalf("after a refused Freeze: Now() = %d, want 5250", got)
	}
	if _, err := c.Advance(math.MaxInt64); !errors.Is(err, ErrOverflow) {
		t.Fatalf("overflowing Advance: %v, want ErrOverflow", err)
	}
	if got := c.Now(); got != 5_250 {
		t.Fatalf("after a refused Advance: Now() = %d, want 5250", got)
	}
	c.Release()
	if got := c.Now(); got != 5_250 {
		t.Fatalf("released behind the source: Now() = %d, want 5250", got)
	}
	src = 9_000
	if got := c.Now(); got != 9_000 {
		t.Fatalf("released: Now() = %d, want 9000", got)
	}
	if c.Frozen() {
		t.Fatal("Frozen() after Release")
	}
	if _, err := c.Advance(-5); !errors.Is(err, ErrOverflow) {
		t.Fatalf("negative Advance: %v", err)
	}
	// Advance on a running clock freezes it where it was.
	src = 10_000
	if got, err := c.Advance(1); got != 10_001 || err != nil || !c.Frozen() {
		t.Fatalf("Advance on the running clock = %d, %v, frozen %v", got, err, c.Frozen())
	}
	src = 20_000
	if got := c.Now(); got != 10_001 {
		t.Fatalf("the advanced clock followed the source: %d", got)
	}
}
