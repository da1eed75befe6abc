package tests

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/httplimit"
)

// One rule of each algorithm, limits small enough to run out.
const policyRules = `domain: policy
descriptors:
  - key: algo
    value: fixed
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: algo
    value: sliding
    rate_limit: {unit: minute, requests_per_unit: 4, sluice: {algorithm: sliding}}
  - key: algo
    value: exact
    rate_limit: {unit: minute, requests_per_unit: 4, sluice: {algorithm: sliding-exact}}
  - key: algo
    value: gcra-burst
    rate_limit: {unit: second, requests_per_unit: 10, sluice: {algorithm: gcra, burst: 20}}
  - key: algo
    value: gcra-smooth
    rate_limit: {unit: minute, requests_per_unit: 60, sluice: {algorithm: gcra, burst: 2}}
  - key: algo
    value: quota
    rate_limit: {unit: day, requests_per_unit: 4, sluice: {algorithm: quota}}
`

// policyQ reads q and w of a RateLimit-Policy value.
func policyQ(t *testing.T, v string) (q, w int64) {
	t.Helper()
	w = -1
	for _, p := range strings.Split(v, ";")[1:] {
		k, val, _ := strings.Cut(p, "=")
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "q":
			q = n
		case "w":
			w = n
		}
	}
	return q, w
}

// Headers agree with themselves for every algorithm, through both doors:
// RateLimit-Remaining (and RateLimit's r) never exceeds RateLimit-Policy's
// q, and httplimit over RL.CHECK and the rate limit service with
// --rls-response-headers state the same policy (GCRA 10/s with burst 20:
// 21 per 3 s, not 10 per second beside a remaining of 20).
func TestRateLimitHeadersAgreePerAlgorithm(t *testing.T) {
	rules := writeRules(t, "policy.yaml", policyRules)
	grpcAddr := freeAddr(t)
	s := StartServer(t, "--rules", rules, "--grpc-addr", grpcAddr, "--rls-response-headers")
	rc, _ := rlsClient(t, grpcAddr)
	want := map[string]string{"fixed": "q=4;w=60", "sliding": "q=4;w=60", "exact": "q=4;w=60",
		"gcra-burst": "q=21;w=3", "gcra-smooth": "q=3;w=3", "quota": "q=4;w=86400"}
	for algo, policy := range want {
		var algoOf = algo
		srv, _ := limitedServer(t, s, httplimit.Config{Key: keyByUser,
			Limit: httplimit.Rules{Domain: "policy", Descriptors: func(*http.Request, string) [][]httplimit.Entry {
				return [][]httplimit.Entry{{{Key: "algo", Value: algoOf}}}
			}}})
		for i := range 6 {
			// httplimit's door (RL.CHECK), then the gRPC door (another key).
			r := httpGet(t, srv.URL, "X-User", "u")
			got := r.header.Get("RateLimit-Policy")
			if !strings.HasSuffix(got, policy) {
				t.Errorf("%s request %d: httplimit RateLimit-Policy %q, want …%s", algo, i, got, policy)
			}
			q, _ := policyQ(t, got)
			if _, rem, _ := rateLimit(t, r.header); rem > q {
				t.Errorf("%s request %d: httplimit RateLimit r=%d above the policy's q=%d", algo, i, rem, q)
			}
			resp, err := rc.ShouldRateLimit(ctx(t), rlsRequest("policy", 1, "algo="+algo))
			if err != nil {
				t.Fatal(err)
			}
			h := map[string]string{}
			for _, hv := range resp.ResponseHeadersToAdd {
				h[hv.Key] = hv.Value
			}
			if !strings.HasSuffix(h["RateLimit-Policy"], policy) {
				t.Errorf("%s request %d: rate limit service RateLimit-Policy %q, want …%s", algo, i, h["RateLimit-Policy"], policy)
			}
			q, _ = policyQ(t, h["RateLimit-Policy"])
			if rem, _ := strconv.ParseInt(h["RateLimit-Remaining"], 10, 64); rem > q {
				t.Errorf("%s request %d: RateLimit-Remaining %d above the policy's q=%d", algo, i, rem, q)
			}
		}
	}
}
