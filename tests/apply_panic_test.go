package tests

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// metricValue scrapes one series' value from a /metrics endpoint (-1 when
// it is absent).
func metricValue(t testing.TB, addr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(string(body))
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

const panicSeries = `sluice_apply_panics_total{command="debug|apply-panic"}`

// A command that panics inside its apply, in the middle of a replicated
// pipeline, stops no node: it answers an internal error everywhere, the
// commands after it in the same entry and later entries apply, the
// replicas agree, and a restart of every node replays the entry alive.
func TestApplyPanicDoesNotStopTheCluster(t *testing.T) {
	metrics := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	c := StartCluster(t, 3, func(i int, _ []string) []string {
		return []string{"--metrics-addr", metrics[i], "--raft-snapshot-threshold", "1000000"}
	})
	leader := c.Leader()
	lc := leader.Client()
	cmds, _ := lc.Pipelined(ctx(t), func(p redis.Pipeliner) error {
		p.Do(ctx(t), "CL.THROTTLE", "{p}a", 5, 10, 60)
		p.Do(ctx(t), "DEBUG", "APPLY-PANIC", "{p}boom")
		p.Do(ctx(t), "CL.THROTTLE", "{p}a", 5, 10, 60)
		return nil
	})
	if len(cmds) != 3 {
		t.Fatalf("%d replies", len(cmds))
	}
	if v := ints(t, cmds[0].(*redis.Cmd)); v[0] != 0 || v[2] != 5 {
		t.Fatalf("first throttle %v", v)
	}
	if err := cmds[1].Err(); err == nil || err.Error() != "ERR internal error in debug|apply-panic" {
		t.Fatalf("DEBUG APPLY-PANIC answered %v", err)
	}
	if v := ints(t, cmds[2].(*redis.Cmd)); v[0] != 0 || v[2] != 4 {
		t.Fatalf("the command after the panic in the same entry: %v", v)
	}
	if v := ints(t, lc.Do(ctx(t), "CL.THROTTLE", "{p}a", 5, 10, 60)); v[2] != 3 {
		t.Fatalf("a later entry: %v", v)
	}
	// The change made before the panic is kept, alike everywhere.
	if typ, err := lc.Do(ctx(t), "TYPE", "{p}boom").Text(); err != nil || typ != "gcra" {
		t.Fatalf("TYPE of the key changed before the panic: %q %v", typ, err)
	}
	c.SameDigests()
	for i, s := range c.Nodes {
		if role(t, s) == "" {
			t.Fatalf("node %d stopped answering", i+1)
		}
		eventually(t, "the panic counted on every node", func() bool { return metricValue(t, metrics[i], panicSeries) == 1 })
		if n := strings.Count(s.Logs(), "command panicked inside its apply"); n != 1 {
			t.Fatalf("node %d logged the panic %d times:\n%s", i+1, n, s.Logs())
		}
		if !strings.Contains(s.Logs(), "runDebugApplyPanic") {
			t.Fatalf("node %d's log line has no stack", i+1)
		}
	}

	// Every node restarts and replays its log through the same entry.
	for _, s := range c.Nodes {
		s.Kill()
	}
	for _, s := range c.Nodes {
		s.Start()
	}
	leader = c.Leader()
	if after := c.SameDigests(); after == "" {
		t.Fatal("no digest after the restart")
	}
	for i, s := range c.Nodes {
		eventually(t, "the entry replayed on every node", func() bool { return metricValue(t, metrics[i], panicSeries) >= 1 })
		if role(t, s) == "" {
			t.Fatalf("node %d died replaying the entry:\n%s", i+1, s.Logs())
		}
	}
	lc = leader.Client()
	if v := ints(t, lc.Do(ctx(t), "CL.THROTTLE", "{p}a", 5, 10, 60)); v[0] != 0 {
		t.Fatalf("after the restart: %v", v)
	}
}

// The same boundary on a single node: the connection stays open and the
// server goes on.
func TestApplyPanicSingleNode(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	err := c.Do(ctx(t), "DEBUG", "APPLY-PANIC", "k").Err()
	if err == nil || err.Error() != "ERR internal error in debug|apply-panic" {
		t.Fatalf("DEBUG APPLY-PANIC: %v", err)
	}
	if typ, _ := c.Do(ctx(t), "TYPE", "k").Text(); typ != "gcra" {
		t.Fatalf("TYPE %q after the panic", typ)
	}
	if v := ints(t, c.Do(ctx(t), "CL.THROTTLE", "k2", 1, 1, 1)); v[0] != 0 {
		t.Fatalf("%v", v)
	}
	// Without --enable-debug-command it is refused like every DEBUG hook.
	plain := StartServerWithout(t, "--enable-debug-command")
	if err := plain.Client().Do(ctx(t), "DEBUG", "APPLY-PANIC", "k").Err(); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("DEBUG APPLY-PANIC without the flag: %v", err)
	}
}

// StartServerWithout starts a server whose arguments leave out flag.
func StartServerWithout(t testing.TB, flag string, extra ...string) *Server {
	t.Helper()
	s := &Server{t: t, DataDir: t.TempDir()}
	s.Args = append([]string{"--data-dir", s.DataDir}, extra...)
	for i, a := range s.Args {
		if a == flag {
			s.Args = append(s.Args[:i], s.Args[i+1:]...)
		}
	}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// malformedCommands are malformed versions of every machine command.
var malformedCommands = [][]any{
	{"CL.THROTTLE", "k", "x", 1, 1}, {"CL.THROTTLE", "k", 1, 0, 1}, {"CL.THROTTLE", "k"},
	{"SW.CHECK", "k", 0, 60}, {"SW.CHECK", "k", 10, 60, "NOPE"}, {"FW.CHECK", "k", 10, 60, "EXACT"},
	{"CONC.ACQUIRE", "c", 0, 30, "r"}, {"CONC.RELEASE", "c", strings.Repeat("r", 300)}, {"CONC.RENEW", "c", "r", -1},
	{"CONC.GET"}, {"QUOTA.CHECK", "q", 1, "FORTNIGHT"}, {"QUOTA.CHECK", "q", 1, "DAY", "TZ", "Mars/Base"},
	{"QUOTA.GET", "q", "x"}, {"QUOTA.REFUND", "q", -1}, {"QUOTA.RESET"},
	{"RL.CHECK", "api", "user", "u"}, {"RL.CHECK", "api", "DESCRIPTOR", "u"},
	{"RL.CHECKALL", "LIMIT", "a", "NOPE", 1}, {"RL.CHECKALL", "LIMIT", "a", "FIXED", 1, 60, "LIMIT", "b", "FIXED", 1, 60},
	{"RL.RULES", "LOAD", "f.yaml", "domain: ["}, {"RL.RULES", "CLEAR", "x", "y"}, {"RL.RULES", "NOPE"},
	{"RL.OVERRIDE", "SET", "api", 0, "minute", "DESCRIPTOR", "u", "v"}, {"RL.OVERRIDE", "DEL", "api"},
	{"RL.SCALE", "SET", "api", 2}, {"RL.SCALE", "GET", "api", "x"},
	{"DEL"}, {"UNLINK"}, {"EXISTS"}, {"TTL"}, {"PTTL", "a", "b"}, {"TYPE"}, {"GET"}, {"DBSIZE", "x"},
	{"FLUSHALL", "NOW"}, {"FLUSHDB", "SYNC", "ASYNC"}, {"DEBUG", "APPLY-PANIC"},
}

// Malformed machine commands get, from the leader and from a follower, the
// error a single node gives, and none of them costs a log entry.
func TestMalformedCommandsNeverEnterTheLog(t *testing.T) {
	single := StartServer(t).Client()
	c := StartCluster(t, 3, nil, "--raft-tick-interval", "1h")
	leader := c.Leader()
	lastIndex := func() int64 {
		v, err := leader.Client().Do(ctx(t), "RAFT", "INFO").Slice()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(v); i += 2 {
			if v[i] == "last_index" {
				return v[i+1].(int64)
			}
		}
		t.Fatalf("RAFT INFO has no last_index: %v", v)
		return 0
	}
	awaitApplyLevel(t, c.Nodes...)
	c.SameDigests()
	before := lastIndex()
	nodes := append([]*Server{leader}, c.Followers(leader)...)
	for _, cmd := range malformedCommands {
		want := single.Do(ctx(t), cmd...).Err()
		if want == nil {
			t.Fatalf("%v: a single node accepts it", cmd)
		}
		for _, s := range nodes {
			got := s.Client().Do(ctx(t), cmd...).Err()
			if got == nil || got.Error() != want.Error() {
				t.Errorf("%v on %s: %v, a single node says %v", cmd, s.Addr, got, want)
			}
		}
	}
	if after := lastIndex(); after != before {
		t.Fatalf("malformed commands appended %d entries", after-before)
	}
	// A well-formed one does append (the check is not vacuous).
	if err := leader.Client().Do(ctx(t), "CL.THROTTLE", "ok", 1, 1, 1).Err(); err != nil {
		t.Fatal(err)
	}
	if after := lastIndex(); after != before+1 {
		t.Fatalf("a well-formed command moved the last index by %d", after-before)
	}
}
