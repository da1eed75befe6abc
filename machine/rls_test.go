package machine

import (
	"strings"
	"testing"
)

const rlsRules = `domain: another
descriptors:
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key3
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: free
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: block
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: named
    rate_limit: {name: base, unit: minute, requests_per_unit: 1}
  - key: better
    rate_limit: {name: better, unit: minute, requests_per_unit: 5, replaces: [{name: base}]}
  - key: q1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: smooth
    rate_limit:
      unit: second
      requests_per_unit: 10
      sluice: {algorithm: gcra, burst: 4}
`

// rls runs RL.SHOULDRATELIMIT with descriptors given as "k=v,k=v" (a
// leading "hits:" or "limit:rpu/unit:" prefix sets those fields) and
// returns the reply in a compact form: "overall | code rpu unit name
// remaining reset shadow | …".
func rls(t *testing.T, m *Machine, now int64, domain string, hits int, descs ...string) string {
	t.Helper()
	args := []string{"RL.SHOULDRATELIMIT", domain, itoa(int64(hits))}
	for _, d := range descs {
		h, rpu, unit := "-", "-", "-"
		for {
			switch {
			case strings.HasPrefix(d, "hits:"):
				var rest string
				h, rest, _ = strings.Cut(strings.TrimPrefix(d, "hits:"), ":")
				d = rest
				continue
			case strings.HasPrefix(d, "limit:"):
				var spec, rest string
				spec, rest, _ = strings.Cut(strings.TrimPrefix(d, "limit:"), ":")
				rpu, unit, _ = strings.Cut(spec, "/")
				d = rest
				continue
			}
			break
		}
		pairs := strings.Split(d, ",")
		args = append(args, itoa(int64(len(pairs))), h, rpu, unit)
		for _, p := range pairs {
			k, v, _ := strings.Cut(p, "=")
			args = append(args, k, v)
		}
	}
	return withoutPolicy(rlsFull(t, m, now, args...))
}

// rlsFull is the compact reply with every status's quota policy (its last
// two fields).
func rlsFull(t *testing.T, m *Machine, now int64, args ...string) string {
	t.Helper()
	return compact(t, do(m, now, args...))
}

// withoutPolicy drops each status's policy pair from a compact reply.
func withoutPolicy(c string) string {
	parts := strings.Split(c, " | ")
	for i := 1; i < len(parts); i++ {
		f := strings.Fields(parts[i])
		if len(f) >= 9 {
			parts[i] = strings.Join(f[:len(f)-2], " ")
		}
	}
	return strings.Join(parts, " | ")
}

// Each status carries the quota policy its remaining counts against: the
// limit over its unit, but GCRA's burst + 1 over the time that takes to
// refill (10/s with burst 4: 5 per second), so RateLimit-Remaining never
// exceeds RateLimit-Policy's q.
func TestShouldRateLimitPolicy(t *testing.T) {
	m := loadRLS(t)
	at := int64(1_700_000_000) * 1e9
	for _, c := range []struct{ desc, want string }{
		{"key2=p", "1 | 1 20 minute \"\" 19 60 0 20 60"},
		{"smooth=p", "1 | 1 10 second \"\" 4 1 0 5 1"},
		{"free=p", "1 | 1 -1 \"\" \"\" 4294967295 -1 0 -1 0"},
	} {
		args := []string{"RL.SHOULDRATELIMIT", "another", "1", "1", "-", "-", "-"}
		k, v, _ := strings.Cut(c.desc, "=")
		args = append(args, k, v)
		if got := rlsFull(t, m, at, args...); got != c.want {
			t.Errorf("%s: %s, want %s", c.desc, got, c.want)
		}
	}
}

// compact flattens a RESP2 reply of integers, bulk strings and arrays.
func compact(t *testing.T, reply string) string {
	t.Helper()
	if strings.HasPrefix(reply, "-") {
		return strings.TrimSpace(reply)
	}
	lines := strings.Split(strings.TrimSuffix(reply, "\r\n"), "\r\n")
	var out []string
	for i := 1; i < len(lines); i++ {
		l := lines[i]
		switch l[0] {
		case ':':
			out = append(out, l[1:])
		case '$':
			i++
			if lines[i] == "" {
				out = append(out, `""`)
			} else {
				out = append(out, lines[i])
			}
		case '*':
			out = append(out, "|")
		}
	}
	return strings.Join(out, " ")
}

func loadRLS(t *testing.T) *Machine {
	m := New(Options{})
	if got := do(m, t0, "RL.RULES", "LOAD", "another.yaml", rlsRules); got != "+OK\r\n" {
		t.Fatalf("load: %q", got)
	}
	return m
}

// The behaviours envoyproxy/ratelimit's integration test checks, at fixed
// instants (t0 is a minute and an hour boundary).
func TestShouldRateLimitLikeEnvoy(t *testing.T) {
	m := loadRLS(t)
	at := t0 + 17e9 + 3e8 // 17.3 s into the minute
	if got := rls(t, m, at, "nosuch", 1, "key2=x"); got != `1 | 1 -1 "" "" 0 -1 0` {
		t.Fatalf("unknown domain: %s", got)
	}
	if got := rls(t, m, at, "another", 1, "nokey=x"); got != `1 | 1 -1 "" "" 0 -1 0` {
		t.Fatalf("no rule: %s", got)
	}
	for i := range 25 {
		want := "1 | 1 20 minute \"\" " + itoa(int64(20-(i+1))) + " 43 0"
		if i >= 20 {
			want = "2 | 2 20 minute \"\" 0 43 0"
		}
		if got := rls(t, m, at, "another", 1, "key2=r1"); got != want {
			t.Fatalf("request %d: %s, want %s", i, got, want)
		}
	}
	// Two descriptors: key3 (10 an hour) refuses from the 11th on; key2's
	// counter is not charged by a refused request (all or nothing), so its
	// remaining stays at 10.
	for i := range 15 {
		rem1, code, rem2 := itoa(int64(20-(i+1))), "1", itoa(int64(10-(i+1)))
		if i >= 10 {
			rem1, code, rem2 = "10", "2", "0"
		}
		want := code + " | 1 20 minute \"\" " + rem1 + " 43 0 | " + code + " 10 hour \"\" " + rem2 + " 3583 0"
		if got := rls(t, m, at, "another", 1, "key2=r2", "key3=r2"); got != want {
			t.Fatalf("pair %d: %s, want %s", i, got, want)
		}
	}
}

func TestShouldRateLimitFeatures(t *testing.T) {
	m := loadRLS(t)
	atLevel(m, Level)
	at := t0 + 5e9
	for _, c := range []struct {
		name  string
		hits  int
		descs []string
		want  string
	}{
		{"unlimited", 1, []string{"free=x"}, `1 | 1 -1 "" "" 4294967295 -1 0`},
		{"shadow allows", 1, []string{"shadow=x"}, `1 | 1 1 second "" 0 1 0`},
		{"shadow over", 1, []string{"shadow=x"}, `1 | 1 1 second "" 0 1 1`},
		{"zero requests", 1, []string{"block=x"}, `2 | 2 0 second "" 0 1 0`},
		{"replaced", 1, []string{"named=a", "better=b"}, `1 | 1 -1 "" "" 0 -1 0 | 1 5 minute better 4 55 0`},
		{"descriptor limit", 1, []string{"limit:2/hour:key2=own"}, `1 | 1 2 hour "" 1 3595 0`},
		{"descriptor limit again", 1, []string{"limit:2/HOUR:key2=own"}, `1 | 1 2 hour "" 0 3595 0`},
		{"descriptor limit over", 1, []string{"limit:2/hour:key2=own"}, `2 | 2 2 hour "" 0 3595 0`},
		{"descriptor limit 0", 1, []string{"limit:0/minute:key2=z"}, `2 | 2 0 minute "" 0 55 0`},
		// unit_multiplier: 2 per window of 30 s, 5 s into it.
		{"descriptor limit of 30 seconds", 1, []string{"limit:2/second*30:key2=w"}, `1 | 1 2 second "" 1 25 0`},
		{"descriptor limit of 30 seconds again", 1, []string{"limit:2/second*30:key2=w"}, `1 | 1 2 second "" 0 25 0`},
		{"descriptor limit of 30 seconds over", 1, []string{"limit:2/second*30:key2=w"}, `2 | 2 2 second "" 0 25 0`},
		{"another window is another counter", 1, []string{"limit:2/second:key2=w"}, `1 | 1 2 second "" 1 1 0`},
		// One counter: the two charges together pass its limit.
		{"a multiplier of 1 is the unit", 1, []string{"limit:1/minute*1:key2=m1", "limit:1/minute:key2=m1"}, `2 | 1 1 minute "" 1 55 0 | 2 1 minute "" 0 55 0`},
		{"hits addend", 5, []string{"key2=h"}, `1 | 1 20 minute "" 15 55 0`},
		{"descriptor hits 0 peeks", 5, []string{"hits:0:key2=h"}, `1 | 1 20 minute "" 15 55 0`},
		{"descriptor hits over", 1, []string{"hits:16:key2=h"}, `2 | 2 20 minute "" 0 55 0`},
		{"request hits 0 means 1", 0, []string{"key2=h"}, `1 | 1 20 minute "" 14 55 0`},
		{"one quota-mode over, the other not: OK", 1, []string{"q1=a", "q2=a"}, `1 | 1 1 minute "" 0 55 0 | 1 1 minute "" 0 55 0`},
		{"quota q1 over alone", 1, []string{"q1=a", "q2=b"}, `1 | 2 1 minute "" 0 55 0 | 1 1 minute "" 0 55 0`},
		{"every quota-mode over", 1, []string{"q1=a", "q2=a"}, `2 | 2 1 minute "" 0 55 0 | 2 1 minute "" 0 55 0`},
		{"gcra", 1, []string{"smooth=s"}, `1 | 1 10 second "" 4 1 0`},
	} {
		if got := rls(t, m, at, "another", c.hits, c.descs...); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestShouldRateLimitBadInput(t *testing.T) {
	m := loadRLS(t)
	for _, args := range [][]string{
		{"RL.SHOULDRATELIMIT", "another", "x", "1", "-", "-", "-", "k", "v"},
		{"RL.SHOULDRATELIMIT", "another", "-1", "1", "-", "-", "-", "k", "v"},
		{"RL.SHOULDRATELIMIT", "another", "1", "0", "-", "-", "-", "k", "v"},
		{"RL.SHOULDRATELIMIT", "another", "1", "2", "-", "-", "-", "k", "v"},
		{"RL.SHOULDRATELIMIT", "another", "1", "1", "x", "-", "-", "k", "v"},
		{"RL.SHOULDRATELIMIT", "another", "1", "1", "-", "5", "-", "k", "v"},
		{"RL.SHOULDRATELIMIT", "another", "1", "1", "-", "5", "fortnight", "k", "v"},
		{"RL.SHOULDRATELIMIT", "another", "1", "1", "-", "5", "second*0", "k", "v"},
		{"RL.SHOULDRATELIMIT", "another", "1", "1", "-", "5", "second*", "k", "v"},
		{"RL.SHOULDRATELIMIT", "another", "1", "1", "-", "5", "second*x", "k", "v"},
		{"RL.SHOULDRATELIMIT", "another", "1", "1", "-", "5", "second*4294967296", "k", "v"},
		{"RL.SHOULDRATELIMIT", "another", "1", "1", "-", "5", "year*300", "k", "v"},
		{"RL.SHOULDRATELIMIT", "another", "1", "1", "-", "-", "-", "", "v"},
		{"RL.SHOULDRATELIMIT", "another", "1", "1", "-", "-", "-", "k", "v", "1"},
		{"RL.SHOULDRATELIMIT", "another", "1", "1", "-", "-", "-", "k"},
	} {
		bad := m.Check(words(args...))
		if bad == "" {
			t.Errorf("%q: accepted", args)
			continue
		}
		if got := do(m, t0, args...); got != "-"+bad+"\r\n" {
			t.Errorf("%q: check %q, apply %q", args, bad, got)
		}
	}
}

// A descriptor's own limit of n units counts apart from one of the unit:
// a request with the other window between two of this one's leaves its
// count as it was (one counter for both would start afresh at each
// change of window, and let the third request through).
func TestShouldRateLimitMultiplierHasItsOwnCounter(t *testing.T) {
	m := loadRLS(t)
	atLevel(m, Level)
	at := t0 + 5e9
	if got := rls(t, m, at, "another", 1, "limit:1/second*30:key2=c"); got != `1 | 1 1 second "" 0 25 0` {
		t.Fatalf("per 30 s: %s", got)
	}
	if got := rls(t, m, at, "another", 1, "limit:1/second:key2=c"); got != `1 | 1 1 second "" 0 1 0` {
		t.Fatalf("per second: %s", got)
	}
	if got := rls(t, m, at+1e9, "another", 1, "limit:1/second*30:key2=c"); got != `2 | 2 1 second "" 0 24 0` {
		t.Fatalf("per 30 s again, in the same window: %s", got)
	}
}
