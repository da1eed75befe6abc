package crossgroup

import (
	"context"
	"testing"

	"github.com/sluice-rl/sluice/resp"
)

// A cancel follows its part's slots: the part's answer is lost, and by the
// time the cancel goes out its slots belong to another group — the cancel
// goes there (where the part's reservation moved with them), never to the
// group the part was first sent to.
func TestCancelGoesToTheSlotsOwnerNow(t *testing.T) {
	c, f, args, _ := newLostRig(t)
	f.lose = "g2"
	f.afterLose = func() { c.cfg.Router.Moved(0, 2, [][2]int{{8192, 16383}}) }
	if _, err := c.Decide(context.Background(), args); err == nil {
		t.Fatal("a check with a lost part was admitted")
	}
	c.Drain()
	f.mu.Lock()
	defer f.mu.Unlock()
	moved := false
	for _, k := range f.cancels {
		if k.group == "g2" {
			t.Fatalf("a cancel went to g2, which no longer owns slots %v", k.slots)
		}
		for _, s := range k.slots {
			moved = moved || s >= 8192
		}
	}
	if !moved {
		t.Fatalf("no cancel for the lost part's slots: %+v", f.cancels)
	}
}

// A part its group refused holds nothing, so it is not cancelled: only the
// admitted part is given back (a cancel there would only leave a
// tombstone refusing a retry of the same id).
func TestRefusedPartIsNotCancelled(t *testing.T) {
	c, f, args, users := newLostRig(t)
	for _, u := range users { // g2's counters spent; g1's whole
		f.machines["g2"].ApplyArgs(f.now, [][]byte{[]byte("RL.CHECK"), []byte("x"), []byte("COST"), []byte("10"),
			[]byte("DESCRIPTOR"), []byte("user"), []byte(u)}, &resp.Writer{})
	}
	res, err := c.Decide(context.Background(), args)
	if err != nil || !res.Limited {
		t.Fatalf("a check g2 refuses: %+v %v", res, err)
	}
	c.Drain()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.cancels) != 1 || f.cancels[0].group != "g1" {
		t.Fatalf("cancels %+v, want one, to g1", f.cancels)
	}
}
