package gcra

import (
	"testing"

	"github.com/sluice-rl/sluice/limiter"
)

// key stands in for one keyspace entry: it holds a TAT and, like the real
// keyspace, expires at that TAT.
type key struct {
	tat    int64
	exists bool
}

// throttle runs one call against k the way the command layer must: drop the
// key once now reaches its expiry, call Throttle, write back only when told.
func (k *key) throttle(t *testing.T, now int64, l Limit, quantity int64) limiter.Result {
	t.Helper()
	if k.exists && now >= k.tat {
		k.exists = false
	}
	before := *k
	newTAT, store, r, err := Throttle(k.tat, k.exists, now, l, quantity)
	if err != nil {
		t.Fatalf("Throttle(now=%d, %+v, q=%d): %v", now, l, quantity, err)
	}
	if store {
		if r.Limited || quantity == 0 {
			t.Fatalf("store=true for limited=%v quantity=%d", r.Limited, quantity)
		}
		if newTAT-now != r.ResetAfter || r.ResetAfter <= 0 {
			t.Fatalf("stored TAT %d at now %d disagrees with ResetAfter %d", newTAT, now, r.ResetAfter)
		}
		k.tat, k.exists = newTAT, true
	} else if newTAT != before.tat {
		t.Fatalf("store=false but newTAT %d != tat %d", newTAT, before.tat)
	}
	if r.Remaining < 0 || r.Remaining > r.Limit || r.ResetAfter < 0 {
		t.Fatalf("result out of range: %+v", r)
	}
	return r
}
