package machine

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
)

func ruleFile(domain string, rpu int) string {
	return "domain: " + domain + "\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: " + itoa(int64(rpu)) + "}\n"
}

// domainsOf lists the loaded domains with their k limit: "a=5 b=7".
func domainsOf(m *Machine) string {
	st := m.Rules()
	if st == nil {
		return "(none)"
	}
	var out []string
	for _, d := range st.Set.Domains() {
		out = append(out, d+"="+itoa(st.Set.Domain(d).Rules[0].Limit))
	}
	return strings.Join(out, " ")
}

// The same RL.RULES semantics on every node: a client's load merges by
// domain, the server's files replace the server's files and keep the
// clients' other domains, CLEAR sticks (the files digest stays, so a
// server re-applies its files only when they change).
func TestRulesLoadMergeAndClear(t *testing.T) {
	m := New(Options{})
	ok := func(args ...string) {
		t.Helper()
		if got := do(m, t0, args...); got != "+OK\r\n" {
			t.Fatalf("%q: %q", args[:2], got)
		}
	}
	ok("RL.RULES", "LOAD-FILES", "a.yaml", ruleFile("a", 1), "b.yaml", ruleFile("b", 2))
	digest := m.Rules().FilesDigest
	ok("RL.RULES", "LOAD", "c.yaml", ruleFile("c", 3), "b2.yaml", ruleFile("b", 20))
	if got := domainsOf(m); got != "a=1 b=20 c=3" {
		t.Fatalf("after a client load: %s", got)
	}
	if m.Rules().FilesDigest != digest {
		t.Fatal("a client load changed the files digest")
	}
	// The server reloads its files: its b replaces the client's b; the
	// client's c stays.
	ok("RL.RULES", "LOAD-FILES", "a.yaml", ruleFile("a", 5), "b.yaml", ruleFile("b", 6))
	if got := domainsOf(m); got != "a=5 b=6 c=3" {
		t.Fatalf("after the server's reload: %s", got)
	}
	if m.Rules().FilesDigest == digest {
		t.Fatal("new files kept the old digest")
	}
	digest = m.Rules().FilesDigest
	ok("RL.RULES", "CLEAR", "c")
	if got := domainsOf(m); got != "a=5 b=6" {
		t.Fatalf("after CLEAR c: %s", got)
	}
	ok("RL.RULES", "CLEAR")
	if got := domainsOf(m); got != "" || m.Rules().FilesDigest != digest {
		t.Fatalf("after CLEAR: %q, digest kept %v", got, m.Rules().FilesDigest == digest)
	}
	// RL.CHECK on a cleared domain limits nothing.
	if got := do(m, t0, "RL.CHECK", "a", "DESCRIPTOR", "k", "v"); !strings.HasPrefix(got, "*7\r\n:0\r\n:-1\r\n") {
		t.Fatalf("RL.CHECK after CLEAR: %q", got)
	}
}

// The rules record round-trips with origins and digest, and the encoding
// of before origins still decodes (every file the server's).
func TestRulesEncoding(t *testing.T) {
	m := New(Options{})
	do(m, t0, "RL.RULES", "LOAD-FILES", "a.yaml", ruleFile("a", 1))
	do(m, t0, "RL.RULES", "LOAD", "c.yaml", ruleFile("c", 3))
	st := m.Rules()
	b := st.AppendBinary(nil)
	got, err := DecodeState(keyspace.KindRules, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	back := got.(*RulesState)
	if back.FilesDigest != st.FilesDigest || len(back.Files) != 2 || back.Files[0].Client || !back.Files[1].Client {
		t.Fatalf("round trip: %+v", back)
	}
	if !bytes.Equal(back.AppendBinary(nil), b) {
		t.Fatal("re-encoding differs")
	}
	legacy := (&RulesState{Files: st.Files}).AppendBinary(nil)
	legacy = legacy[:len(legacy)-1-len(st.Files)-32]
	got, err = DecodeState(keyspace.KindRules, legacy, nil)
	if err != nil {
		t.Fatal(err)
	}
	if back := got.(*RulesState); back.FilesDigest != FilesDigestOf(st.Files) || back.Files[1].Client {
		t.Fatalf("legacy decode: %+v", back)
	}
}

// An override RL.CHECK could not apply is refused when it is set.
func TestOverrideMustBeApplicable(t *testing.T) {
	m := loadRLS(t)
	got := do(m, t0, "RL.OVERRIDE", "SET", "another", "2000000000", "second", "DESCRIPTOR", "key2", "x")
	if !strings.HasPrefix(got, "-ERR override not applicable: ") {
		t.Fatalf("an override of 2e9 a second: %q", got)
	}
	if got := do(m, t0, "RL.OVERRIDE", "SET", "another", "1000000000", "second", "DESCRIPTOR", "key2", "x"); got != "+OK\r\n" {
		t.Fatalf("1e9 a second: %q", got)
	}
	if got := do(m, t0+1, "RL.CHECK", "another", "DESCRIPTOR", "key2", "x"); !strings.HasPrefix(got, "*7\r\n:0\r\n:1000000000\r\n") {
		t.Fatalf("RL.CHECK under the override: %q", got)
	}
}

// TZ names UTC in any case, as every other option word.
func TestQuotaZoneUTCAnyCase(t *testing.T) {
	m := New(Options{})
	for _, z := range []string{"UTC", "utc", "Utc"} {
		if got := do(m, t0, "QUOTA.CHECK", "q"+z, "5", "day", "tz", z); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
			t.Errorf("TZ %s: %q", z, got)
		}
	}
}

// A shadow rule past its limit allows, with retry_after -1 as every allow.
func TestShadowAllowHasNoWait(t *testing.T) {
	m := loadRLS(t)
	do(m, t0, "RL.CHECK", "another", "DESCRIPTOR", "shadow", "s")
	got := do(m, t0+1, "RL.CHECK", "another", "DESCRIPTOR", "shadow", "s")
	if !strings.HasPrefix(got, "*7\r\n:0\r\n:1\r\n:0\r\n:-1\r\n") {
		t.Fatalf("a shadow allow past the limit: %q", got)
	}
}
