package tests

import (
	"testing"
)

// A fresh single node and a fresh group of three come up at the apply
// level their binary supports (INFO cluster), every member alike: the
// leader raises it once each voter's member report says it can — so the
// level's new behaviour (a unit multiplier in RL.SHOULDRATELIMIT) is
// served. A group with a member of an older release is the robustness
// suite's rolling-upgrade scenario.
func TestApplyLevelRaised(t *testing.T) {
	single := StartServer(t)
	cl := StartCluster(t, 3, nil)
	awaitApplyLevel(t, append([]*Server{single}, cl.Nodes...)...)
	reply, err := cl.Leader().Client().Do(ctx(t), "RL.SHOULDRATELIMIT", "any", "1", "1", "-", "5", "second*30", "k", "v").Slice()
	if err != nil || len(reply) != 2 {
		t.Fatalf("a unit multiplier at level 1: %v %v", reply, err)
	}
}

// awaitApplyLevel waits for each server to say its log is at the apply
// level its binary supports (INFO cluster): a group's leader logs the
// raise just after it is elected, an entry a test that counts entries
// must not count.
func awaitApplyLevel(t *testing.T, servers ...*Server) {
	t.Helper()
	for _, s := range servers {
		c := s.Client()
		eventually(t, "the apply level raised at "+s.Addr, func() bool {
			level := infoField(t, c, "cluster", "sluice_apply_level")
			return level != "" && level != "0" && level == infoField(t, c, "cluster", "sluice_apply_level_supported")
		})
	}
}
