package tests

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// envoyExample is the example of envoyproxy/ratelimit's README, as its
// users write it: marketing messages 5 a day per number, any message 100 a
// day per number.
const envoyExample = `domain: messaging
descriptors:
  # marketing messages to one number: 5 a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  # any message to one number: 100 a day
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`

// apiRules has a hierarchy (per user, per endpoint), a shadow rule and a
// GCRA rule through the sluice extension.
const apiRules = `domain: api
descriptors:
  - key: user
    rate_limit:
      name: per-user
      unit: minute
      requests_per_unit: 10
  - key: endpoint
    rate_limit:
      name: per-endpoint
      unit: minute
      requests_per_unit: 2
  - key: canary
    shadow_mode: true
    rate_limit:
      name: canary
      unit: minute
      requests_per_unit: 1
  - key: plan
    value: free
    rate_limit:
      name: free
      unit: second
      requests_per_unit: 1
      sluice:
        algorithm: gcra
        burst: 2
`

// writeRules writes a rule file into a fresh directory and returns its path.
func writeRules(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rlReply is an RL.CHECK reply: five integers, the binding rule, its window.
type rlReply struct {
	five   [5]int64
	rule   string
	window int64
}

func rlCheck(t *testing.T, c *redis.Client, args ...any) rlReply {
	t.Helper()
	v, err := c.Do(ctx(t), args...).Slice()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if len(v) != 7 {
		t.Fatalf("%v: reply %#v has %d elements, want 7", args, v, len(v))
	}
	var r rlReply
	for i := range 5 {
		r.five[i] = v[i].(int64)
	}
	r.rule, r.window = v[5].(string), v[6].(int64)
	return r
}

func TestPolicyEnvoyExampleFixedWindows(t *testing.T) {
	s := StartServer(t, "--rules", writeRules(t, "messaging.yaml", envoyExample))
	c := s.Client()
	setClock(t, c, future) // a day boundary
	marketing := []any{"RL.CHECK", "messaging", "DESCRIPTOR", "message_type", "marketing", "to_number", "2061111111",
		"DESCRIPTOR", "to_number", "2061111111"}
	for i := range 5 {
		r := rlCheck(t, c, marketing...)
		want := rlReply{[5]int64{0, 5, int64(4 - i), -1, 86400}, "message_type=marketing/to_number", 86400}
		if r != want {
			t.Fatalf("marketing %d: %+v, want %+v", i+1, r, want)
		}
	}
	r := rlCheck(t, c, marketing...)
	if r.five[0] != 1 || r.rule != "message_type=marketing/to_number" || r.five[3] != 86400 {
		t.Fatalf("6th marketing message: %+v, want refused by the marketing rule until the next day", r)
	}
	// The refusal charged nothing: the number has had 5 messages.
	r = rlCheck(t, c, "RL.CHECK", "messaging", "DESCRIPTOR", "to_number", "2061111111")
	if r.five != [5]int64{0, 100, 94, -1, 86400} || r.rule != "to_number" {
		t.Fatalf("plain message: %+v", r)
	}
	// A new day is a new fixed window.
	advance(t, c, 24*time.Hour)
	if r := rlCheck(t, c, marketing...); r.five[0] != 0 || r.five[2] != 4 {
		t.Fatalf("next day: %+v", r)
	}
	// Not limited: an unknown value for a value-only rule, an unknown domain.
	for _, args := range [][]any{
		{"RL.CHECK", "messaging", "DESCRIPTOR", "message_type", "transactional"},
		{"RL.CHECK", "nowhere", "DESCRIPTOR", "to_number", "1"},
	} {
		if r := rlCheck(t, c, args...); r != (rlReply{[5]int64{0, -1, -1, -1, 0}, "", 0}) {
			t.Fatalf("%v: %+v, want the unlimited reply", args, r)
		}
	}
	// redis-cli shows the same reply shape.
	out := redisCLI(t, s.Addr, "RL.CHECK", "messaging", "DESCRIPTOR", "to_number", "42")
	if out != "0\n100\n99\n-1\n86400\nto_number\n86400\n" {
		t.Fatalf("redis-cli: %q", out)
	}
}

// The case: a new user refused twice by the endpoint limit must not
// have the user limit charged for those refusals.
func TestPolicyHierarchicalAllOrNothing(t *testing.T) {
	s := StartServer(t, "--rules", writeRules(t, "api.yaml", apiRules))
	c := s.Client()
	setClock(t, c, future)
	both := []any{"RL.CHECK", "api", "DESCRIPTOR", "user", "u1", "DESCRIPTOR", "endpoint", "/search"}
	for i := range 2 {
		if r := rlCheck(t, c, both...); r.five[0] != 0 || r.rule != "per-endpoint" || r.five[2] != int64(1-i) {
			t.Fatalf("allowed %d: %+v", i, r)
		}
	}
	for range 2 {
		if r := rlCheck(t, c, both...); r.five[0] != 1 || r.rule != "per-endpoint" || r.five[3] < 1 {
			t.Fatalf("refused: %+v", r)
		}
	}
	if r := rlCheck(t, c, "RL.CHECK", "api", "DESCRIPTOR", "user", "u1"); r.five != [5]int64{0, 10, 7, -1, 60} {
		t.Fatalf("user after two refusals: %+v, want 3 of 10 used", r)
	}
	// COST charges every limit n units, or none.
	if r := rlCheck(t, c, "RL.CHECK", "api", "COST", 8, "DESCRIPTOR", "user", "u1"); r.five[0] != 1 {
		t.Fatalf("cost 8 over 7 remaining: %+v", r)
	}
	// The GCRA rule from the sluice extension: burst 2 → 3 at once.
	free := []any{"RL.CHECK", "api", "DESCRIPTOR", "plan", "free"}
	for i := range 3 {
		if r := rlCheck(t, c, free...); r.five[0] != 0 || r.rule != "free" || r.five[1] != 3 {
			t.Fatalf("gcra %d: %+v", i, r)
		}
	}
	if r := rlCheck(t, c, free...); r.five[0] != 1 || r.five[3] != 1 {
		t.Fatalf("gcra refused: %+v", r)
	}
	// Bad input: clear errors, and the server stays up.
	for _, args := range [][]any{
		{"RL.CHECK", "api", "DESCRIPTOR", "user"},
		{"RL.CHECK", "api", "COST", -1, "DESCRIPTOR", "user", "u"},
		{"RL.CHECK", "api", "user", "u"},
		{"RL.CHECK", "api"},
	} {
		if err := c.Do(ctx(t), args...).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR") {
			t.Fatalf("%v: %v, want an ERR", args, err)
		}
	}
}

func TestPolicyShadowModeNeverRefuses(t *testing.T) {
	s := StartServer(t, "--rules", writeRules(t, "api.yaml", apiRules))
	c := s.Client()
	setClock(t, c, future)
	for i := range 4 {
		r := rlCheck(t, c, "RL.CHECK", "api", "DESCRIPTOR", "canary", "c1", "DESCRIPTOR", "user", "u9")
		if r.five[0] != 0 || r.rule != "per-user" {
			t.Fatalf("check %d with a shadow rule over its limit: %+v", i, r)
		}
	}
	if r := rlCheck(t, c, "RL.CHECK", "api", "DESCRIPTOR", "canary", "c1"); r.five[0] != 0 || r.rule != "canary" || r.five[2] != 0 {
		t.Fatalf("shadow alone: %+v", r)
	}
}

func TestPolicyReload(t *testing.T) {
	path := writeRules(t, "api.yaml", apiRules)
	metricsAddr := freeAddr(t)
	s := StartServer(t, "--rules", path, "--metrics-addr", metricsAddr)
	c := s.Client()
	setClock(t, c, future)
	user := []any{"RL.CHECK", "api", "DESCRIPTOR", "user", "u1"}
	rlCheck(t, c, user...)
	rlCheck(t, c, user...)

	// SIGHUP: per-user goes to 20; its counter keeps its two units.
	if err := os.WriteFile(path, []byte(strings.Replace(apiRules, "requests_per_unit: 10", "requests_per_unit: 20", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, "the reloaded limit", func() bool {
		return rlPeek(t, c, user...).five[1] == 20
	})
	if r := rlCheck(t, c, user...); r.five[2] != 17 {
		t.Fatalf("after reload: %+v, want 20-3 remaining (the counter kept its state)", r)
	}

	// A broken file is refused: logged, counted, old rules kept.
	if err := os.WriteFile(path, []byte(apiRules+"  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, "the failed reload in the log", func() bool {
		return strings.Contains(s.Logs(), "rules not reloaded") && strings.Contains(s.Logs(), "api.yaml:")
	})
	if r := rlCheck(t, c, user...); r.five[1] != 20 {
		t.Fatalf("after a broken reload: %+v, want the old rules", r)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "sluice_rules_reload_failures_total ") ||
		strings.Contains(string(body), "sluice_rules_reload_failures_total 0") {
		t.Fatalf("the failure is not counted:\n%s", body)
	}

	// Writing the file is enough: it is watched.
	if err := os.WriteFile(path, []byte(strings.Replace(apiRules, "requests_per_unit: 10", "requests_per_unit: 30", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rewritten file in force", func() bool {
		return rlPeek(t, c, user...).five[1] == 30
	})
}

// rlPeek checks with COST 0: it reports without charging.
func rlPeek(t *testing.T, c *redis.Client, args ...any) rlReply {
	t.Helper()
	peek := append([]any{args[0], args[1], "COST", 0}, args[2:]...)
	return rlCheck(t, c, peek...)
}

func TestPolicyBadFileStopsStartup(t *testing.T) {
	path := writeRules(t, "bad.yaml", "domain: x\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n")
	out, err := startMustFail(t, "--addr", freeAddr(t), "--data-dir", t.TempDir(), "--rules", path)
	if err == nil || !strings.Contains(out, "bad.yaml:5") || !strings.Contains(out, "fortnight") {
		t.Fatalf("exit %v, output:\n%s", err, out)
	}
}

func TestPolicyOverridesAtFixedInstants(t *testing.T) {
	s := StartServer(t, "--rules", writeRules(t, "api.yaml", apiRules))
	c := s.Client()
	setClock(t, c, future)
	base := future / 1e9
	err := c.Do(ctx(t), "RL.OVERRIDE", "SET", "api", 1000, "minute", "START", base+60, "UNTIL", base+180,
		"DESCRIPTOR", "user", "enterprise-x").Err()
	if err != nil {
		t.Fatal(err)
	}
	user := []any{"RL.CHECK", "api", "DESCRIPTOR", "user", "enterprise-x"}
	if r := rlCheck(t, c, user...); r.five[1] != 10 {
		t.Fatalf("before START: %+v", r)
	}
	advance(t, c, 60*time.Second)
	if r := rlCheck(t, c, user...); r.five[1] != 1000 || r.rule != "per-user" {
		t.Fatalf("during: %+v", r)
	}
	list, err := c.Do(ctx(t), "RL.OVERRIDE", "LIST", "api").Slice()
	if err != nil || len(list) != 1 {
		t.Fatalf("LIST: %v %#v", err, list)
	}
	entry := list[0].([]any)
	if d := entry[0].([]any); d[0] != "user" || d[1] != "enterprise-x" || entry[1] != int64(1000) || entry[2] != int64(60) ||
		entry[4] != base+60 || entry[5] != base+180 {
		t.Fatalf("LIST entry %#v", entry)
	}
	advance(t, c, 120*time.Second)
	if r := rlCheck(t, c, user...); r.five[1] != 10 {
		t.Fatalf("after UNTIL: %+v", r)
	}
	if n, err := c.Do(ctx(t), "RL.OVERRIDE", "LIST", "api").Slice(); err != nil || len(n) != 0 {
		t.Fatalf("LIST after expiry: %v %#v", err, n)
	}
}

// An override is durable: it survives a crash (SIGKILL) of the node.
func TestPolicyOverrideSurvivesCrash(t *testing.T) {
	s := StartServer(t, "--rules", writeRules(t, "api.yaml", apiRules), "--quota-fsync", "always")
	c := s.Client()
	until := time.Now().Add(24 * time.Hour).Unix()
	if err := c.Do(ctx(t), "RL.OVERRIDE", "SET", "api", 500, "minute", "UNTIL", until, "DESCRIPTOR", "user", "vip").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx(t), "RL.SCALE", "SET", "api", "0.5").Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Start()
	c = s.Client()
	if r := rlCheck(t, c, "RL.CHECK", "api", "DESCRIPTOR", "user", "vip"); r.five[1] != 250 {
		t.Fatalf("after a crash: %+v, want the override (500) scaled by 0.5", r)
	}
	if r := rlCheck(t, c, "RL.CHECK", "api", "DESCRIPTOR", "user", "other"); r.five[1] != 5 {
		t.Fatalf("after a crash: %+v, want the rule (10) scaled by 0.5", r)
	}
}

func TestPolicyAdaptiveRecovery(t *testing.T) {
	s := StartServer(t, "--rules", writeRules(t, "api.yaml", apiRules))
	c := s.Client()
	setClock(t, c, future)
	scale := func(factor string, more ...any) {
		t.Helper()
		if err := c.Do(ctx(t), append([]any{"RL.SCALE", "SET", "api", factor}, more...)...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	limit := func() int64 {
		t.Helper()
		return rlPeek(t, c, "RL.CHECK", "api", "DESCRIPTOR", "user", "a").five[1]
	}
	scale("0.2")
	if got := limit(); got != 2 {
		t.Fatalf("scaled to 0.2: limit %d, want 2", got)
	}
	scale("1", "RECOVER", 100)
	for _, step := range []struct {
		after time.Duration
		want  int64
	}{{0, 2}, {25 * time.Second, 4}, {25 * time.Second, 6}, {50 * time.Second, 10}, {time.Hour, 10}} {
		advance(t, c, step.after)
		if got := limit(); got != step.want {
			t.Fatalf("%v later: limit %d, want %d", step.after, got, step.want)
		}
	}
	v, err := c.Do(ctx(t), "RL.SCALE", "GET", "api").Slice()
	if err != nil || v[0] != "1.000000" || v[2] != int64(0) {
		t.Fatalf("GET: %v %#v", err, v)
	}
	for _, bad := range []string{"0", "1.5", "-0.5", "abc", "0.1234567"} {
		if err := c.Do(ctx(t), "RL.SCALE", "SET", "api", bad).Err(); err == nil {
			t.Fatalf("factor %q accepted", bad)
		}
	}
}

func TestPolicyInlineCheckAll(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	req := []any{"RL.CHECKALL", "LIMIT", "{u7}:sec", "GCRA", 1, 1, 1, "LIMIT", "{u7}:day", "FIXED", 100, 86400,
		"LIMIT", "{u7}:month", "QUOTA", 1000, "month", "TZ", "Europe/Paris"}
	for range 2 {
		if r := rlCheck(t, c, req...); r.five[0] != 0 || r.rule != "{u7}:sec" {
			t.Fatalf("allowed: %+v", r)
		}
	}
	if r := rlCheck(t, c, req...); r.five[0] != 1 || r.rule != "{u7}:sec" {
		t.Fatalf("refused: %+v", r)
	}
	v, err := c.Do(ctx(t), "QUOTA.GET", "{u7}:month").Slice()
	if err != nil || v[0] != int64(2) {
		t.Fatalf("quota after one refusal: %v %#v, want 2 used", err, v)
	}
	if err := c.Do(ctx(t), "RL.CHECKALL", "LIMIT", "a", "FIXED", 1, 1, "LIMIT", "b", "FIXED", 1, 1).Err(); err == nil ||
		!strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Fatalf("keys in two slots: %v", err)
	}
	out := redisCLI(t, s.Addr, "RL.CHECKALL", "LIMIT", "solo", "SLIDING", "5", "60")
	if lines := strings.Split(out, "\n"); len(lines) != 8 || strings.Join(lines[:4], " ") != "0 5 4 -1" || lines[5] != "solo" || lines[6] != "60" {
		t.Fatalf("redis-cli: %q", out)
	}
}

// Rules, overrides and scale factors are replicated state: every node
// holds the same, and a follower's digest matches the leader's.
func TestPolicyReplicated(t *testing.T) {
	path := writeRules(t, "api.yaml", apiRules)
	cl := StartCluster(t, 3, nil, "--rules", path)
	leader := cl.Leader()
	c := leader.Client()
	defer func() {
		if t.Failed() {
			t.Logf("leader log:\n%s", leader.Logs())
		}
	}()
	eventually(t, "the leader applied its rules", func() bool {
		v, err := c.Do(ctx(t), "RL.RULES", "LIST", "api").Slice()
		return err == nil && len(v) == 4
	})
	if err := c.Do(ctx(t), "RL.OVERRIDE", "SET", "api", 77, "minute", "DESCRIPTOR", "user", "r").Err(); err != nil {
		t.Fatal(err)
	}
	if r := rlCheck(t, c, "RL.CHECK", "api", "DESCRIPTOR", "user", "r", "DESCRIPTOR", "endpoint", "/e"); r.five[0] != 0 {
		t.Fatalf("replicated check: %+v", r)
	}
	cl.SameDigests()
}

// A rules directory mounted from a Kubernetes ConfigMap: each file is a
// symlink through ..data, a symlink the kubelet swaps (a new timestamped
// directory, ..data_tmp renamed over ..data) when the ConfigMap changes —
// no event names a .yaml file. The swap reloads the rules.
func TestPolicyReloadOnAConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(n int, src string) {
		ts := filepath.Join(dir, fmt.Sprintf("..2026_11_27_00_00_%02d.000000001", n))
		if err := os.Mkdir(ts, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ts, "api.yaml"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version(1, apiRules)
	if err := os.Symlink(filepath.Join("..data", "api.yaml"), filepath.Join(dir, "api.yaml")); err != nil {
		t.Fatal(err)
	}
	s := StartServer(t, "--rules", dir)
	c := s.Client()
	setClock(t, c, future)
	user := []any{"RL.CHECK", "api", "DESCRIPTOR", "user", "u1"}
	if r := rlPeek(t, c, user...); r.five[1] != 10 {
		t.Fatalf("at start: %+v", r)
	}
	version(2, strings.Replace(apiRules, "requests_per_unit: 10", "requests_per_unit: 40", 1))
	eventually(t, "the swapped ConfigMap's rules in force", func() bool {
		return rlPeek(t, c, user...).five[1] == 40
	})
}
