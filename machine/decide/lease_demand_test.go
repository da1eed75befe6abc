package decide

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The demand record: a holder that stops asking stops counting; the
// record is snapshotted, digested and moved like other state.
func TestLeaseDemandShareAndEncoding(t *testing.T) {
	d := &LeaseDemand{}
	for i, w := range []int64{50, 150, 300} {
		if err := d.ask([]byte(fmt.Sprint("h", i)), w, 100+int64(i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := []int64{d.share("h0", 100, 0), d.share("h1", 100, 0), d.share("h2", 100, 0), d.share("nobody", 100, 0)}; fmt.Sprint(got) != "[10 30 60 0]" {
		t.Fatalf("shares of 100 among 50, 150, 300: %v", got)
	}
	// 11 among them: 1.1, 3.3, 6.6; the unit rounding leaves goes to the
	// part that lost most; the parts add up to 11.
	if got := []int64{d.share("h0", 11, 0), d.share("h1", 11, 0), d.share("h2", 11, 0)}; fmt.Sprint(got) != "[1 3 7]" {
		t.Fatalf("shares of 11 among 50, 150, 300: %v", got)
	}
	eq := &LeaseDemand{}
	for _, h := range []string{"c", "a", "b"} {
		eq.ask([]byte(h), 200, 10, 0)
	}
	// Equal asks: 3.67 each; the two units rounding leaves go to two of
	// the three, in turn from one round to the next.
	fours := map[string]int{}
	for round := range uint64(300) {
		sum := int64(0)
		for _, h := range []string{"a", "b", "c"} {
			s := eq.share(h, 11, round)
			sum += s
			if s == 4 {
				fours[h]++
			}
		}
		if sum != 11 {
			t.Fatalf("round %d: shares add up to %d", round, sum)
		}
	}
	for h, n := range fours {
		if n < 150 || n > 250 {
			t.Fatalf("%s took the unit rounding leaves %d times of 300 (%v): not in turn", h, n, fours)
		}
	}
	if got := d.share("h1", 1000, 0); got != 150 {
		t.Fatalf("under capacity, a holder gets what it asked: %d", got)
	}
	// h0 asks again at 101: h0's ask (until 100) had stopped counting.
	if err := d.ask([]byte("h1"), 150, 300, 101); err != nil {
		t.Fatal(err)
	}
	if len(d.Holders) != 2 || d.Holders[0].Holder != "h1" || d.share("h0", 100, 0) != 0 {
		t.Fatalf("after h0's ask lapsed: %+v", d.Holders)
	}
	enc := d.AppendBinary(nil)
	back, err := decodeLeaseDemand(enc)
	if err != nil || fmt.Sprint(back) != fmt.Sprint(d) {
		t.Fatalf("round trip: %v %v, want %v", back, err, d)
	}
	for i := range enc {
		if _, err := decodeLeaseDemand(enc[:i]); err == nil {
			t.Fatalf("a demand record cut at %d of %d decoded", i, len(enc))
		}
	}
	// Huge asks: the share is exact, with no overflow.
	big := &LeaseDemand{}
	big.ask([]byte("a"), 4294967295, 10, 0)
	big.ask([]byte("b"), 4294967295, 10, 0)
	if a, b := big.share("a", 4294967295, 0), big.share("b", 4294967295, 0); a != 2147483648 || b != 2147483647 {
		t.Fatalf("halves of 2^32-1: %d %d", a, b)
	}
}

// On random asks the shares never exceed what each asked, and add up to
// the capacity exactly when the asks exceed it (else to the asks).
func TestLeaseSharesAddUp(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		d := &LeaseDemand{}
		var sum int64
		for i := range 1 + r.IntN(20) {
			w := 1 + r.Int64N(1000)
			d.ask([]byte(fmt.Sprint("h", i)), w, 10, 0)
			sum += w
		}
		capacity := r.Int64N(3000)
		var total int64
		for _, h := range d.Holders {
			s := d.share(h.Holder, capacity, 0)
			if s < 0 || s > h.Want {
				t.Fatalf("capacity %d, %+v: %s's share %d", capacity, d.Holders, h.Holder, s)
			}
			total += s
		}
		if want := min(capacity, sum); total != want {
			t.Fatalf("capacity %d, asks %d: shares add up to %d, want %d", capacity, sum, total, want)
		}
	}
}
