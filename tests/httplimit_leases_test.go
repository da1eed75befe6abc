package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-rl/sluice/httplimit"
)

// commandCalls is how many times the server ran name (INFO commandstats).
func commandCalls(t *testing.T, c *redis.Client, name string) int64 {
	t.Helper()
	info, err := c.Info(ctx(t), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+name+":calls="); ok {
			n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			return n
		}
	}
	return 0
}

// leasedServer is a handler behind httplimit with leases of rules.
func leasedServer(t *testing.T, c redis.UniversalClient, holder string) (*httptest.Server, *httplimit.Leases) {
	t.Helper()
	leases, err := httplimit.WithLeases(httplimit.Rules{Domain: "edge", Descriptors: func(_ *http.Request, key string) [][]httplimit.Entry {
		return [][]httplimit.Entry{{{Key: "route", Value: key}}}
	}}, httplimit.LeaseOptions{Holder: holder, TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Client: c, Key: func(*http.Request) string { return "/api" }, Limit: leases,
		Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})))
	t.Cleanup(srv.Close)
	return srv, leases
}

// Issue #45 (httplimit local mode): behind httplimit.WithLeases, 400
// requests are decided mostly in process — a handful of sluice calls, not
// 400 — with the same headers; Close gives back what the lease left, so
// the counter then holds exactly what was admitted. Two processes share a
// limit of 100 a minute: together they admit no more than it allows.
func TestHTTPLimitLeases(t *testing.T) {
	s := StartServer(t, "--rules", writeRules(t, "edge.yaml", `domain: edge
descriptors:
  - key: route
    rate_limit: {name: per-route, unit: minute, requests_per_unit: 1000}
  - key: small
    rate_limit: {name: small, unit: minute, requests_per_unit: 100}
`))
	c := s.Client()
	srv, leases := leasedServer(t, c, "web-1")
	admitted := 0
	for i := range 400 {
		r := httpGet(t, srv.URL)
		switch r.status {
		case http.StatusOK:
			admitted++
		default:
			t.Fatalf("request %d: %d %q", i, r.status, r.body)
		}
		if got := r.header.Get("RateLimit-Policy"); !strings.Contains(got, `"per-route";q=1000;w=60`) {
			t.Fatalf("request %d: RateLimit-Policy %q", i, got)
		}
		if i == 0 {
			// The first request was checked per request and asked for a
			// lease off its path: the rest are decided from it once it came.
			eventually(t, "the first lease granted", func() bool { return commandCalls(t, c, "rl.lease") >= 1 })
		}
	}
	calls := commandCalls(t, c, "rl.lease") + commandCalls(t, c, "rl.check")
	t.Logf("400 requests, %d sluice calls", calls)
	if calls > 40 {
		t.Fatalf("400 requests took %d sluice calls: not decided from leases", calls)
	}
	if err := leases.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := checkInts(t, c, "RL.CHECK", "edge", "COST", 0, "DESCRIPTOR", "route", "/api")[2]; r != 1000-int64(admitted) {
		t.Fatalf("after Close, remaining %d; %d were admitted", r, admitted)
	}

	// Two processes on a limit of 100 a minute, 150 requests each.
	smallServer := func(holder string) (*httptest.Server, *httplimit.Leases) {
		leases, err := httplimit.WithLeases(httplimit.Rules{Domain: "edge", Descriptors: func(*http.Request, string) [][]httplimit.Entry {
			return [][]httplimit.Entry{{{Key: "small", Value: "x"}}}
		}}, httplimit.LeaseOptions{Holder: holder, TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		mw, err := httplimit.New(httplimit.Config{Client: c, Key: func(*http.Request) string { return "k" }, Limit: leases, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
		t.Cleanup(srv.Close)
		return srv, leases
	}
	a, la := smallServer("a")
	b, lb := smallServer("b")
	total := 0
	for range 150 {
		for _, srv := range []*httptest.Server{a, b} {
			if httpGet(t, srv.URL).status == http.StatusOK {
				total++
			}
		}
	}
	la.Close(context.Background())
	lb.Close(context.Background())
	if total > 100 || total < 90 {
		t.Fatalf("two processes admitted %d on a limit of 100", total)
	}
	if r := checkInts(t, c, "RL.CHECK", "edge", "COST", 0, "DESCRIPTOR", "small", "x")[2]; r != 100-int64(total) {
		t.Fatalf("after both closed, remaining %d; %d were admitted", r, total)
	}
}
