package tests

import (
	"bufio"
	"fmt"
	"strings"
	"testing"
)

// respCommand encodes args as a RESP array.
func respCommand(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// Every redirect names the slot of the command's key: on a follower, each
// keyed command — alone, inside MULTI, and WATCH — answers MOVED with
// CLUSTER KEYSLOT of its key and the leader's address. The table must
// cover every command COMMAND reports with a key.
func TestEveryRedirectNamesTheKeysSlot(t *testing.T) {
	cl := StartCluster(t, 3, nil)
	leader := cl.Leader()
	follower := cl.Followers(leader)[0]
	// %k stands for the key.
	table := map[string][]string{
		"cl.throttle":        {"CL.THROTTLE", "%k", "10", "20", "60"},
		"conc.acquire":       {"CONC.ACQUIRE", "%k", "5", "30", "req-1"},
		"conc.release":       {"CONC.RELEASE", "%k", "req-1"},
		"conc.renew":         {"CONC.RENEW", "%k", "req-1", "30"},
		"conc.get":           {"CONC.GET", "%k"},
		"fw.check":           {"FW.CHECK", "%k", "10", "60"},
		"sw.check":           {"SW.CHECK", "%k", "10", "60"},
		"quota.check":        {"QUOTA.CHECK", "%k", "100", "DAY"},
		"quota.get":          {"QUOTA.GET", "%k"},
		"quota.refund":       {"QUOTA.REFUND", "%k", "1"},
		"quota.reset":        {"QUOTA.RESET", "%k"},
		"rl.check":           {"RL.CHECK", "%k", "DESCRIPTOR", "a", "b"},
		"rl.shouldratelimit": {"RL.SHOULDRATELIMIT", "%k", "1", "1", "-", "-", "-", "a", "b"},
		"rl.reserve":         {"RL.RESERVE", "%k", "r1", "60", "DESCRIPTOR", "a", "b"},
		"rl.settle":          {"RL.SETTLE", "%k", "r1", "1"},
		"rl.cancel":          {"RL.CANCEL", "%k", "r1"},
		"rl.lease":           {"RL.LEASE", "%k", "h1", "10", "WANT", "1", "DESCRIPTOR", "a", "b"},                            // no rules: routed by the domain
		"rl.share":           {"RL.SHARE", "%k", "h1", "10", "USED", "0", "ASKED", "1", "OVER", "1", "DESCRIPTOR", "a", "b"}, // no rules: routed by the domain
		"gcra":               {"GCRA", "%k", "10", "5", "1"},
		"rl.scale":           {"RL.SCALE", "GET", "%k"},
		"rl.override":        {"RL.OVERRIDE", "LIST", "%k"},
		"del":                {"DEL", "%k"},
		"unlink":             {"UNLINK", "%k"},
		"exists":             {"EXISTS", "%k"},
		"get":                {"GET", "%k"},
		"ttl":                {"TTL", "%k"},
		"pttl":               {"PTTL", "%k"},
		"type":               {"TYPE", "%k"},
		"watch":              {"WATCH", "%k"},
	}
	c := follower.Client()
	infos, err := c.Command(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for name, info := range infos {
		if info.FirstKeyPos > 0 && table[name] == nil && !strings.Contains(name, "|") {
			t.Errorf("%s has keys (first at %d) and no row in this table: add one", name, info.FirstKeyPos)
		}
	}
	keys := []string{"user:{tenant42}:x", "plain-key", "", "{}", "a{b}c", "\x00\xff{bin}\r\n"}
	for name, row := range table {
		if info := infos[name]; info == nil || info.FirstKeyPos == 0 {
			t.Errorf("%s: the table has it, COMMAND reports no key for it", name)
			continue
		}
		for _, key := range keys {
			slot, err := c.ClusterKeySlot(ctx(t), key).Result()
			if err != nil {
				t.Fatal(err)
			}
			args := make([]string, len(row))
			for i, a := range row {
				args[i] = strings.ReplaceAll(a, "%k", key)
			}
			want := fmt.Sprintf("-MOVED %d %s", slot, leader.Addr)
			conn := dialRaw(t, follower.Addr)
			r := bufio.NewReader(conn)
			conn.Write([]byte(respCommand(args...)))
			if got := readLines(t, r, 1)[0]; got != want {
				t.Errorf("%s with key %q: %q, want %q", name, key, got, want)
			}
			if name == "watch" {
				continue
			}
			conn.Write([]byte(respCommand("MULTI") + respCommand(args...) + respCommand("EXEC")))
			got := readLines(t, r, 3)
			if got[1] != want || !strings.HasPrefix(got[2], "-EXECABORT") {
				t.Errorf("%s with key %q inside MULTI: %q, want %q then EXECABORT", name, key, got, want)
			}
		}
	}

}
