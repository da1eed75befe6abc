package policy

import (
	"strings"
	"testing"
)

// The examples of envoyproxy/ratelimit's README, restated with our own
// names and numbers in testdata/envoy, must load and match as envoy
// documents them.

func loadEnvoy(t *testing.T) *Set {
	t.Helper()
	s, err := LoadDir("testdata/envoy")
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	return s
}

func e(kv ...string) []Entry {
	out := make([]Entry, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Entry{kv[i], kv[i+1]})
	}
	return out
}

func mustMatch(t *testing.T, s *Set, domain string, entries []Entry) *Rule {
	t.Helper()
	r := s.Match(domain, entries)
	if r == nil {
		t.Fatalf("%s %v: no rule, want one", domain, entries)
	}
	return r
}

func mustNotMatch(t *testing.T, s *Set, domain string, entries []Entry) {
	t.Helper()
	if r := s.Match(domain, entries); r != nil {
		t.Fatalf("%s %v: matched %s (line %d), want no rule", domain, entries, r.Path, r.Line)
	}
}

func key(r *Rule, entries []Entry) string { return string(r.AppendKey(nil, entries)) }

func TestEnvoyLoadsEveryExample(t *testing.T) {
	s := loadEnvoy(t)
	got := strings.Join(s.Domains(), ",")
	want := "backoffice,depth_nested,depth_shallow,detailed,gateway_ip,globs,kv_store,notifications,overrides_demo,per_value_metrics,shared_buckets,soft_launch"
	if got != want {
		t.Fatalf("domains %s, want %s", got, want)
	}
}

func TestEnvoyExactValues(t *testing.T) {
	s := loadEnvoy(t)
	orders := mustMatch(t, s, "kv_store", e("table", "orders"))
	fallback := mustMatch(t, s, "kv_store", e("table", "fallback"))
	if orders.Limit != 300 || fallback.Limit != 40 || orders.Window != 1e9 || orders.Algorithm != Fixed {
		t.Fatalf("orders %+v fallback %+v", orders, fallback)
	}
	mustNotMatch(t, s, "kv_store", e("table", "other"))  // no key-only rule
	mustNotMatch(t, s, "kv_store", e("TABLE", "orders")) // case-sensitive
	mustNotMatch(t, s, "unknown_domain", e("table", "orders"))
}

func TestEnvoyNestedKeyOnlyCountsEachValueApart(t *testing.T) {
	s := loadEnvoy(t)
	a := e("kind", "promo", "device", "d-1")
	b := e("kind", "promo", "device", "d-2")
	ra, rb := mustMatch(t, s, "notifications", a), mustMatch(t, s, "notifications", b)
	if ra != rb || ra.Limit != 3 || ra.Window != 86400e9 || ra.Path != "kind=promo/device" {
		t.Fatalf("promo rule %+v / %+v", ra, rb)
	}
	if key(ra, a) == key(rb, b) {
		t.Fatalf("two devices share counter %q", key(ra, a))
	}
	top := mustMatch(t, s, "notifications", e("device", "d-1"))
	if top.Limit != 50 || top == ra {
		t.Fatalf("device rule %+v", top)
	}
	mustNotMatch(t, s, "notifications", e("kind", "promo")) // placeholder level has no limit
	mustNotMatch(t, s, "notifications", e("kind", "news", "device", "d-1"))
}

func TestEnvoyValueBeatsKeyOnly(t *testing.T) {
	s := loadEnvoy(t)
	blocked := mustMatch(t, s, "gateway_ip", e("client_ip", "203.0.113.9"))
	if blocked.Algorithm != Deny || blocked.Limit != 0 {
		t.Fatalf("blocked address: %+v", blocked)
	}
	other := mustMatch(t, s, "gateway_ip", e("client_ip", "198.51.100.1"))
	if other.Algorithm != Fixed || other.Limit != 12 {
		t.Fatalf("other address: %+v", other)
	}
}

func TestEnvoyDepthMustEqual(t *testing.T) {
	s := loadEnvoy(t)
	two := e("tenant", "acme", "region", "eu")
	mustNotMatch(t, s, "depth_shallow", two)
	mustMatch(t, s, "depth_shallow", two[:1])
	mustMatch(t, s, "depth_nested", two)
	mustNotMatch(t, s, "depth_nested", two[:1])
	mustNotMatch(t, s, "depth_nested", e("tenant", "acme", "region", "eu", "zone", "a"))
}

func TestEnvoyUnlimited(t *testing.T) {
	s := loadEnvoy(t)
	u := mustMatch(t, s, "backoffice", e("sso", "x"))
	if u.Algorithm != Unlimited || u.Algorithm.Stateful() {
		t.Fatalf("sso: %+v", u)
	}
	if b := mustMatch(t, s, "backoffice", e("billing", "x")); b.Limit != 25 || b.Window != 60e9 {
		t.Fatalf("billing: %+v", b)
	}
}

func TestEnvoyShadowMode(t *testing.T) {
	s := loadEnvoy(t)
	r7 := mustMatch(t, s, "soft_launch", e("app", "api", "account", "trial-7"))
	r8 := mustMatch(t, s, "soft_launch", e("app", "api", "account", "trial-8"))
	if !r7.ShadowMode || r7.Limit != 4 || r8.ShadowMode || r8.Limit != 9 {
		t.Fatalf("trial-7 %+v trial-8 %+v", r7, r8)
	}
}

func TestEnvoyReplaces(t *testing.T) {
	s := loadEnvoy(t)
	basic := e("tier", "basic", "login", "ann")
	gold := e("tier", "gold", "login", "ann")
	rb, rg := mustMatch(t, s, "overrides_demo", basic), mustMatch(t, s, "overrides_demo", gold)
	if rb.Name != "ann_basic" || len(rg.Replaces) != 1 || rg.Replaces[0] != "ann_basic" {
		t.Fatalf("basic %+v gold %+v", rb, rg)
	}
	both := []*Rule{rb, rg}
	ApplyReplaces(both)
	if both[0] != nil || both[1] != rg {
		t.Fatalf("both descriptors: %v, want [nil gold]", both)
	}
	alone := []*Rule{rb, nil}
	ApplyReplaces(alone)
	if alone[0] != rb {
		t.Fatal("basic alone was dropped")
	}
}

func TestEnvoyDetailedMetricDoesNotChangeMatching(t *testing.T) {
	s := loadEnvoy(t)
	any := mustMatch(t, s, "detailed", e("route", "search"))
	if !any.DetailedMetric || any.Limit != 15 {
		t.Fatalf("route=search: %+v", any)
	}
	if r := mustMatch(t, s, "detailed", e("route", "checkout")); r.DetailedMetric || r.Limit != 45 {
		t.Fatalf("route=checkout: %+v", r)
	}
}

func TestEnvoyWildcards(t *testing.T) {
	s := loadEnvoy(t)
	for _, tc := range []struct {
		k, v string
		ok   bool
	}{
		{"bucket", "img-", true}, {"bucket", "img-cats", true}, {"bucket", "im", false}, {"bucket", "xmg-1", false},
		{"url", "/v2/42/edit", true}, {"url", "/v2//edit", true}, {"url", "/v2/42/view", false}, {"url", "/v2/edit", false},
		{"topic", "/t/a/part/b/ack", true}, {"topic", "/t/a/part/ack", false}, {"topic", "/t//part//ack", true},
		{"topic", "/t/part/ack", false},
	} {
		r := s.Match("globs", e(tc.k, tc.v))
		if (r != nil) != tc.ok {
			t.Errorf("%s=%q matched %v, want %v", tc.k, tc.v, r != nil, tc.ok)
		}
	}
	a, b := e("bucket", "img-a"), e("bucket", "img-b")
	r := mustMatch(t, s, "globs", a)
	if key(r, a) == key(r, b) {
		t.Fatal("wildcard without share_threshold shares a counter")
	}
}

func TestEnvoyValueToMetric(t *testing.T) {
	s := loadEnvoy(t)
	r := mustMatch(t, s, "per_value_metrics", e("service", "api", "verb", "GET", "principal", "u1"))
	if r.Limit != 90 || !strings.HasPrefix(r.Path, "service/verb/principal") {
		t.Fatalf("%+v", r)
	}
}

func TestEnvoyShareThreshold(t *testing.T) {
	s := loadEnvoy(t)
	a, b := e("path", "docs/a.pdf"), e("path", "docs/b.csv")
	r := mustMatch(t, s, "shared_buckets", a)
	if key(r, a) != key(r, b) {
		t.Fatalf("shared wildcard: %q vs %q", key(r, a), key(r, b))
	}
	if strings.Contains(key(r, a), "a.pdf") {
		t.Fatalf("shared key %q carries the value", key(r, a))
	}
	c, d := e("media", "media/a.png"), e("media", "media/b.png")
	rm := mustMatch(t, s, "shared_buckets", c)
	if key(rm, c) == key(rm, d) {
		t.Fatal("share_threshold: false shares a counter")
	}
}
