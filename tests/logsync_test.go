package tests

import (
	"testing"
)

// With the Raft log synced on a timer, a SIGKILL of any node — the leader
// included — loses no acknowledged decision: an append counts once a
// majority holds it, and a killed process's writes outlive it.
func TestLogSyncIntervalSurvivesKills(t *testing.T) {
	cl := StartCluster(t, 3, nil, "--raft-log-sync", "interval:1s")
	cc := cl.Client()
	acked := int64(0)
	for round := range 3 {
		for range 30 {
			if err := cc.Do(ctx(t), "QUOTA.CHECK", "{ls}q", 1_000_000, "DAY").Err(); err == nil {
				acked++
			}
		}
		victim := cl.Leader()
		if round == 1 {
			victim = cl.Followers(victim)[0]
		}
		victim.Kill()
		victim.Start()
		cl.Leader()
	}
	for _, s := range cl.Nodes {
		s.Kill()
	}
	for _, s := range cl.Nodes {
		s.Start()
	}
	cl.Leader()
	var used int64
	eventually(t, "the quota readable after the restarts", func() bool {
		v, err := cl.Client().Do(ctx(t), "QUOTA.GET", "{ls}q").Slice()
		if err != nil {
			return false
		}
		used = v[0].(int64)
		return true
	})
	if used < acked {
		t.Fatalf("%d units used after the kills, %d acknowledged", used, acked)
	}
}
