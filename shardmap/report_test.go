package shardmap

import (
	"testing"
	"time"
)

// Job views print in a fixed order, an ended one with its instant; an
// ended view holds until that instant.
func TestJobViews(t *testing.T) {
	views := []JobView{{Target: "g3", Ranges: [][2]int{{300, 300}}, Until: 1700000000500},
		{Target: "g2", Ranges: [][2]int{{0, 99}, {200, 299}}}}
	if got := FormatJobViews(views); got != "0-99,200-299>g2;300-300>g3@1700000000500" {
		t.Fatalf("FormatJobViews: %q", got)
	}
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	if !views[1].Shown(at(1 << 50)) {
		t.Fatal("a running job's view ends")
	}
	if !views[0].Shown(at(1700000000499)) || views[0].Shown(at(1700000000500)) {
		t.Fatal("an ended job's view is shown until its instant, not after")
	}
}
