package clock

import "testing"

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
	c.Freeze(5_000)
	if got := c.Now(); got != 5_000 {
		t.Fatalf("frozen Now() = %d, want 5000", got)
	}
	if got := c.Advance(250); got != 5_250 {
		t.Fatalf("Advance = %d, want 5250", got)
	}
	c.Freeze(10) // earlier than handed out: held at the last instant
	if got := c.Now(); got != 5_250 {
		t.Fatalf("Freeze into the past: Now() = %d, want 5250", got)
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
	if got := c.Advance(-5); got != 9_000 {
		t.Fatalf("negative Advance moved time: %d", got)
	}
}
