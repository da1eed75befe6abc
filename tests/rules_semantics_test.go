package tests

import (
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ruleDomains lists the domains RL.RULES LIST shows, sorted.
func ruleDomains(t *testing.T, c *redis.Client) string {
	t.Helper()
	v, err := c.Do(ctx(t), "RL.RULES", "LIST").Slice()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range v {
		seen[r.([]any)[0].(string)] = true
	}
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

const clientRules = "domain: client\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 3}\n"

// RL.RULES behaves alike on one node and on a replicated leader: CLEAR
// stays cleared (the leader's once-a-second check does not bring the
// files back), a client's LOAD merges by domain, and a reload of the
// server's files (SIGHUP) brings them back and keeps the client's domain.
func TestRulesSameOnOneNodeAndCluster(t *testing.T) {
	path := writeRules(t, "api.yaml", apiRules)
	single := StartServer(t, "--rules", path)
	cl := StartCluster(t, 3, nil, "--rules", path)
	leader := cl.Leader()
	for _, tc := range []struct {
		name   string
		c      *redis.Client
		hup    func()
		settle func()
	}{
		{"one node", single.Client(), func() { single.cmd.Process.Signal(syscall.SIGHUP) }, func() {}},
		{"cluster", leader.Client(), func() {
			for _, s := range cl.Nodes {
				s.cmd.Process.Signal(syscall.SIGHUP)
			}
		}, func() { time.Sleep(1500 * time.Millisecond) /* past the leader's once-a-second check */ }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			eventually(t, "the files applied", func() bool { return ruleDomains(t, c) == "api" })
			if err := c.Do(ctx(t), "RL.RULES", "LOAD", "client.yaml", clientRules).Err(); err != nil {
				t.Fatal(err)
			}
			if got := ruleDomains(t, c); got != "api client" {
				t.Fatalf("after a client's LOAD: %q", got)
			}
			if err := c.Do(ctx(t), "RL.RULES", "CLEAR").Err(); err != nil {
				t.Fatal(err)
			}
			tc.settle()
			if got := ruleDomains(t, c); got != "" {
				t.Fatalf("CLEAR did not stay: %q", got)
			}
			if err := c.Do(ctx(t), "RL.RULES", "LOAD", "client.yaml", clientRules).Err(); err != nil {
				t.Fatal(err)
			}
			tc.hup()
			eventually(t, "SIGHUP brings the files back beside the client's domain", func() bool {
				return ruleDomains(t, c) == "api client"
			})
		})
	}
	cl.SameDigests()
}
