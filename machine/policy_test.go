package machine

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/resp"
)

const t0 = int64(1_767_225_600_000_000_000) // 2026-01-01T00:00:00Z

// do applies one command at now and returns its RESP reply.
func do(m *Machine, now int64, args ...string) string {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	var w resp.Writer
	m.ApplyArgs(now, b, &w)
	return string(w.Buf)
}

func loadAPI(t *testing.T, m *Machine) {
	t.Helper()
	src, err := os.ReadFile("testdata/api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := do(m, t0, "RL.RULES", "LOAD", "api.yaml", string(src)); got != "+OK\r\n" {
		t.Fatalf("load: %q", got)
	}
}

// five reads the first five integers of a multi-check reply.
func five(t *testing.T, reply string) string {
	t.Helper()
	lines := strings.Split(reply, "\r\n")
	if len(lines) < 8 || lines[0] != "*7" {
		t.Fatalf("reply %q", reply)
	}
	out := []string{}
	for _, l := range lines[1:6] {
		out = append(out, strings.TrimPrefix(l, ":"))
	}
	return strings.Join(out, " ") + " " + lines[7]
}

func TestRLCheckAllOrNothing(t *testing.T) {
	m := New(Options{})
	loadAPI(t, m)
	check := func(now int64) string {
		return five(t, do(m, now, "RL.CHECK", "api", "DESCRIPTOR", "user", "u1", "DESCRIPTOR", "endpoint", "/x"))
	}
	// per-endpoint (2/min) binds: allowed twice, charging per-user too.
	if got := check(t0); got != "0 2 1 -1 60 per-endpoint" {
		t.Fatalf("1st: %s", got)
	}
	if got := check(t0 + 1); got != "0 2 0 -1 60 per-endpoint" {
		t.Fatalf("2nd: %s", got)
	}
	// Refused twice: per-user must not be charged by the refusals.
	for i := 0; i < 2; i++ {
		if got := check(t0 + 2); !strings.HasPrefix(got, "1 2 0 ") || !strings.HasSuffix(got, "per-endpoint") {
			t.Fatalf("refused: %s", got)
		}
	}
	got := five(t, do(m, t0+3, "RL.CHECK", "api", "DESCRIPTOR", "user", "u1"))
	if got != "0 5 2 -1 60 per-user" {
		t.Fatalf("per-user after refusals: %s (want 3 used of 5, then this one)", got)
	}
}

func TestRLCheckShadowUnknownAndErrors(t *testing.T) {
	m := New(Options{})
	loadAPI(t, m)
	for i := 0; i < 3; i++ {
		got := five(t, do(m, t0, "RL.CHECK", "api", "DESCRIPTOR", "shadowed", "s"))
		if !strings.HasPrefix(got, "0 1 ") {
			t.Fatalf("shadow %d: %s", i, got)
		}
	}
	if got := do(m, t0, "RL.CHECK", "nope", "DESCRIPTOR", "a", "b"); got != "*7\r\n:0\r\n:-1\r\n:-1\r\n:-1\r\n:0\r\n$0\r\n\r\n:0\r\n" {
		t.Fatalf("unknown domain: %q", got)
	}
	for _, bad := range [][]string{
		{"RL.CHECK", "api", "DESCRIPTOR", "user"},
		{"RL.CHECK", "api", "COST", "-1", "DESCRIPTOR", "user", "u"},
		{"RL.CHECK", "api", "user", "u"},
		{"RL.CHECK", "api", "DESCRIPTOR", "DESCRIPTOR", "user", "u"},
	} {
		if got := do(m, t0, bad...); !strings.HasPrefix(got, "-ERR") {
			t.Fatalf("%v: %q", bad, got)
		}
	}
	if got := do(m, t0, "RL.RULES", "LOAD", "x.yaml", "domain: x\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1}\n  - key: a\n"); !strings.Contains(got, "x.yaml:5") {
		t.Fatalf("bad file: %q", got)
	}
	// The broken load left the old rules.
	if got := do(m, t0, "RL.RULES", "LIST", "api"); !strings.HasPrefix(got, "*5\r\n") {
		t.Fatalf("list after bad load: %q", got)
	}
}

func TestRLOverrideAndScale(t *testing.T) {
	m := New(Options{})
	loadAPI(t, m)
	const sec = int64(1_000_000_000)
	start, until := t0/sec+100, t0/sec+200
	if got := do(m, t0, "RL.OVERRIDE", "SET", "api", "50", "minute", "START", itoa(start), "UNTIL", itoa(until), "DESCRIPTOR", "user", "vip"); got != "+OK\r\n" {
		t.Fatalf("set: %q", got)
	}
	check := func(now int64) string {
		return five(t, do(m, now, "RL.CHECK", "api", "DESCRIPTOR", "user", "vip"))
	}
	if got := check(t0 + 99*sec); got != "0 5 4 -1 21 per-user" {
		t.Fatalf("before start: %s", got)
	}
	if got := check(t0 + 100*sec); got != "0 50 48 -1 20 per-user" {
		t.Fatalf("during: %s", got)
	}
	if got := check(t0 + 200*sec); !strings.HasPrefix(got, "0 5 ") {
		t.Fatalf("after until: %s", got)
	}
	if got := do(m, t0+200*sec, "RL.OVERRIDE", "LIST", "api"); got != "*0\r\n" {
		t.Fatalf("list after expiry: %q", got)
	}

	// Scale 0.5 at once; raised to 1 it recovers over 100 s.
	if got := do(m, t0+300*sec, "RL.SCALE", "SET", "api", "0.5"); got != "+OK\r\n" {
		t.Fatalf("scale: %q", got)
	}
	if got := five(t, do(m, t0+300*sec, "RL.CHECK", "api", "DESCRIPTOR", "user", "s1")); got != "0 2 1 -1 60 per-user" {
		t.Fatalf("scaled: %s", got)
	}
	do(m, t0+400*sec, "RL.SCALE", "SET", "api", "1", "RECOVER", "100")
	if got := do(m, t0+450*sec, "RL.SCALE", "GET", "api"); got != "*3\r\n$8\r\n0.750000\r\n$8\r\n1.000000\r\n:50000\r\n" {
		t.Fatalf("halfway: %q", got)
	}
	if got := five(t, do(m, t0+450*sec, "RL.CHECK", "api", "DESCRIPTOR", "user", "s2")); got != "0 3 2 -1 30 per-user" {
		t.Fatalf("recovering: %s", got)
	}
	if got := five(t, do(m, t0+500*sec, "RL.CHECK", "api", "DESCRIPTOR", "user", "s3")); got != "0 5 4 -1 40 per-user" {
		t.Fatalf("recovered: %s", got)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestRLCheckAll(t *testing.T) {
	m := New(Options{})
	req := func(now int64) string {
		return five(t, do(m, now, "RL.CHECKALL", "LIMIT", "{u}:day", "FIXED", "3", "86400",
			"LIMIT", "{u}:burst", "GCRA", "1", "1", "60", "LIMIT", "{u}:month", "QUOTA", "10", "month", "TZ", "Europe/Paris"))
	}
	// GCRA burst 2 binds; its refusal must not charge the others.
	if got := req(t0); got != "0 2 1 -1 60 {u}:burst" {
		t.Fatalf("1: %s", got)
	}
	req(t0)
	if got := req(t0); !strings.HasPrefix(got, "1 2 0 ") {
		t.Fatalf("3: %s", got)
	}
	if got := five(t, do(m, t0, "RL.CHECKALL", "LIMIT", "{u}:day", "FIXED", "3", "86400")); got != "0 3 0 -1 86400 {u}:day" {
		t.Fatalf("day after a refusal: %s", got)
	}
	if got := do(m, t0, "RL.CHECKALL", "LIMIT", "a", "FIXED", "3", "60", "LIMIT", "b", "FIXED", "3", "60"); !strings.HasPrefix(got, "-CROSSSLOT") {
		t.Fatalf("cross slot: %q", got)
	}
	for _, bad := range [][]string{
		{"RL.CHECKALL", "LIMIT", "k", "NOPE", "1", "2"},
		{"RL.CHECKALL", "LIMIT", "k", "FIXED", "1"},
		{"RL.CHECKALL", "COST", "-2", "LIMIT", "k", "FIXED", "1", "1"},
		{"RL.CHECKALL", "LIMIT", "k", "GCRA", "1", "x", "1"},
		{"RL.CHECKALL", "LIMIT", "k", "QUOTA", "1", "fortnight"},
		{"RL.CHECKALL", "k", "FIXED", "1", "1", "1"},
	} {
		if got := do(m, t0, bad...); !strings.HasPrefix(got, "-") {
			t.Fatalf("%v: %q", bad, got)
		}
	}
}

func TestPolicyCommandsWithoutRules(t *testing.T) {
	m := New(Options{})
	for _, args := range [][]string{
		{"RL.RULES", "LIST"}, {"RL.RULES", "LIST", "x"}, {"RL.RULES", "CLEAR"},
		{"RL.CHECK", "x", "DESCRIPTOR", "a", "b"}, {"RL.OVERRIDE", "LIST", "x"}, {"RL.SCALE", "GET", "x"},
		{"RL.OVERRIDE", "DEL", "x", "DESCRIPTOR", "a", "b"}, {"DEL", RulesKey}, {"FLUSHALL"},
	} {
		if got := do(m, t0, args...); strings.HasPrefix(got, "-") {
			t.Fatalf("%v: %q", args, got)
		}
	}
}

func TestRLCheckQuotaMode(t *testing.T) {
	m := New(Options{})
	rules := "domain: q\ndescriptors:\n" +
		"  - key: a\n    quota_mode: true\n    rate_limit: {unit: minute, requests_per_unit: 1}\n" +
		"  - key: b\n    quota_mode: true\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
	if got := do(m, t0, "RL.RULES", "LOAD", "q.yaml", rules); got != "+OK\r\n" {
		t.Fatal(got)
	}
	req := func() string {
		return five(t, do(m, t0, "RL.CHECK", "q", "DESCRIPTOR", "a", "x", "DESCRIPTOR", "b", "y"))
	}
	// a is over after one request, but b still has room: allowed, and
	// only b is charged. Once b is over too, both refuse: refused.
	for i, want := range []string{"0 1 0 -1 60 a", "0 2 0 -1 60 b", "1 1 0 60 60 a"} {
		if got := req(); got != want {
			t.Fatalf("request %d: %s, want %s", i+1, got, want)
		}
	}
}

// FLUSHALL drops the counters and the reservations on them, and keeps
// the configuration: rules, overrides, scales. sluice's own records are
// not keys: DEL, EXISTS, TYPE, TTL and DBSIZE do not see them.
func TestFlushKeepsConfiguration(t *testing.T) {
	m := New(Options{})
	loadAPI(t, m)
	do(m, t0, "RL.SCALE", "SET", "api", "0.5")
	check := func() string { return five(t, do(m, t0, "RL.CHECK", "api", "DESCRIPTOR", "user", "u")) }
	if got := check(); got != "0 2 1 -1 60 per-user" {
		t.Fatalf("scaled: %s", got)
	}
	do(m, t0, "RL.RESERVE", "api", "r1", "60", "DESCRIPTOR", "user", "v")
	do(m, t0, "FLUSHALL")
	if got := check(); got != "0 2 1 -1 60 per-user" {
		t.Fatalf("after FLUSHALL: %s, want the rules and the scale, a fresh counter", got)
	}
	if got := do(m, t0, "RL.SETTLE", "api", "r1", "0"); got != "$-1\r\n" {
		t.Fatalf("a reservation after FLUSHALL: %q", got)
	}
	if got := do(m, t0, "DBSIZE"); got != ":1\r\n" {
		t.Fatalf("DBSIZE %q, want one counter", got)
	}
	for _, args := range [][]string{{"DEL", RulesKey}, {"UNLINK", RulesKey}, {"EXISTS", RulesKey}} {
		if got := do(m, t0, args...); got != ":0\r\n" {
			t.Fatalf("%v: %q", args, got)
		}
	}
	if got := do(m, t0, "TYPE", RulesKey); got != "+none\r\n" {
		t.Fatalf("TYPE of the rules' record: %q", got)
	}
	if got := do(m, t0, "TTL", RulesKey); got != ":-2\r\n" {
		t.Fatalf("TTL of the rules' record: %q", got)
	}
	if got := check(); got != "0 2 0 -1 60 per-user" {
		t.Fatalf("after DEL of the rules' record: %s, want the rules still", got)
	}
}
