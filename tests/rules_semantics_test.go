package tests

import (
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

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
	httpAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cl := StartCluster(t, 3, func(i int, _ []string) []string { return []string{"--http-addr", httpAddrs[i]} }, "--rules", path)
	leader := cl.Leader()
	// syncChecks is how many times the leader checked its files against
	// the applied rules.
	syncChecks := func() int {
		for _, l := range strings.Split(httpGet(t, "http://"+httpAddrs[indexOf(cl, leader)]+"/metrics").body, "\n") {
			if v, ok := strings.CutPrefix(l, "sluice_rules_sync_checks_total "); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		return -1
	}
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
		}, func() {
			// Two of the leader's checks after the CLEAR: the files were
			// compared with the applied rules at least once since.
			from := syncChecks()
			eventually(t, "two checks of the leader's files", func() bool { return syncChecks() >= from+2 })
		}},
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
