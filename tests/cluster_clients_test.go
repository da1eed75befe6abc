package tests

import (
	"fmt"
	"strings"
	"testing"
)

// Every command with keys routes through go-redis' ClusterClient to the
// node that serves it (it reads COMMAND for key positions and follows
// MOVED): none fails with a redirection it could not follow.
func TestEveryCommandThroughClusterClient(t *testing.T) {
	path := writeRules(t, "api.yaml", apiRules)
	cl := StartCluster(t, 3, nil, "--rules", path)
	awaitApplyLevel(t, cl.Nodes...) // GCRA answers from level 1
	cc := cl.Client()
	// The leader applies the rule files through the log once it serves
	// (it checks every second); the client asks any node.
	var last string
	eventuallyExplained(t, "rules applied", func() bool {
		v, err := cc.Do(ctx(t), "RL.RULES", "LIST").Slice()
		last = fmt.Sprintf("RL.RULES LIST = %v, %v", v, err)
		return err == nil && len(v) > 0
	}, func() string { return last + "\n" + cl.Logs() })
	for _, cmd := range [][]any{
		{"CL.THROTTLE", "user123", 15, 30, 60}, {"GCRA", "user124", 10, 5, 1.5, "TOKENS", 2}, {"SW.CHECK", "sw", 10, 60}, {"FW.CHECK", "fw", 10, 60, "COST", 2},
		{"CONC.ACQUIRE", "c", 2, 30, "r1"}, {"CONC.RENEW", "c", "r1", 30}, {"CONC.GET", "c"}, {"CONC.RELEASE", "c", "r1"},
		{"QUOTA.CHECK", "q", 100, "DAY"}, {"QUOTA.GET", "q"}, {"QUOTA.REFUND", "q", 1}, {"QUOTA.RESET", "q"},
		{"RL.CHECK", "api", "DESCRIPTOR", "user", "u1"}, {"RL.CHECKALL", "LIMIT", "{t}a", "GCRA", 1, 2, 3, "LIMIT", "{t}b", "FIXED", 5, 60},
		{"RL.OVERRIDE", "SET", "api", 5, "minute", "DESCRIPTOR", "user", "u2"}, {"RL.OVERRIDE", "LIST", "api"},
		{"RL.SCALE", "SET", "api", "0.5"}, {"RL.SCALE", "GET", "api"}, {"RL.OVERRIDE", "DEL", "api", "DESCRIPTOR", "user", "u2"},
		{"RL.SHOULDRATELIMIT", "api", 1, 1, "-", "-", "-", "user", "u3"},
		{"GET", "user123"}, {"TTL", "user123"}, {"PTTL", "user123"}, {"TYPE", "user123"}, {"EXISTS", "user123"},
		{"DEL", "sw"}, {"UNLINK", "fw"},
	} {
		err := cc.Do(ctx(t), cmd...).Err()
		if err != nil && err.Error() != "redis: nil" {
			msg := err.Error()
			if strings.HasPrefix(msg, "MOVED") || strings.HasPrefix(msg, "ASK") || strings.HasPrefix(msg, "CROSSSLOT") || strings.HasPrefix(msg, "CLUSTERDOWN") {
				t.Errorf("%v: %v", cmd, err)
			} else {
				t.Errorf("%v: unexpected error %v", cmd, err)
			}
		}
	}
}
