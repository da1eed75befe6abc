package shardmap

import (
	"reflect"
	"testing"
	"time"
)

// A member's report round-trips through INFO cluster, job views included;
// malformed parts are skipped; an ended view holds until its instant.
func TestReportRoundTrip(t *testing.T) {
	views := []JobView{{Target: "g2", Ranges: [][2]int{{0, 99}, {200, 299}}},
		{Target: "g3", Ranges: [][2]int{{300, 300}}, Until: 1700000000500}}
	info := "# Cluster\r\ncluster_enabled:1\r\nsluice_slots_epoch:7\r\nsluice_slots:0-8191\r\n" +
		"sluice_migrating:" + FormatJobViews(views) + ";junk;5-1>g4;7>g5@soon\r\n"
	r, ok := ParseReport(info)
	if !ok || r.Epoch != 7 || !reflect.DeepEqual(r.Ranges, [][2]int{{0, 8191}}) || !reflect.DeepEqual(r.Jobs, views) {
		t.Fatalf("%v %+v", ok, r)
	}
	if _, ok := ParseReport("cluster_enabled:1\r\n"); ok {
		t.Fatal("a member with no slots reported")
	}
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	if !views[0].Shown(at(1 << 50)) {
		t.Fatal("a running job's view ends")
	}
	if !views[1].Shown(at(1700000000499)) || views[1].Shown(at(1700000000500)) {
		t.Fatal("an ended job's view is shown until its instant, not after")
	}
}
