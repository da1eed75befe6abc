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
	for _, s := range append([]*Server{single}, cl.Nodes...) {
		c := s.Client()
		eventually(t, "the apply level raised at "+s.Addr, func() bool {
			level := infoField(t, c, "cluster", "sluice_apply_level")
			return level != "" && level != "0" && level == infoField(t, c, "cluster", "sluice_apply_level_supported")
		})
	}
	reply, err := cl.Leader().Client().Do(ctx(t), "RL.SHOULDRATELIMIT", "any", "1", "1", "-", "5", "second*30", "k", "v").Slice()
	if err != nil || len(reply) != 2 {
		t.Fatalf("a unit multiplier at level 1: %v %v", reply, err)
	}
}
