package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/httplimit"
)

// Issue #58: a Go service (httplimit.WithShares) and an Envoy (RLQS, the
// filter's model) share one bucket the same way: RL.SHARE divides the
// rule's rate between them by what they ask. The Envoy, alone, is given the
// whole rate; once the Go service asks too, the Envoy's next share is
// smaller and the Go service gets the rest, deciding in process (no call
// a request). Close charges what the Go service admitted.
func TestGoServiceAndEnvoyShareABucket(t *testing.T) {
	grpcAddr := freeAddr(t)
	s := StartServer(t, "--grpc-addr", grpcAddr, "--rules", writeRules(t, "edge.yaml", `domain: edge
descriptors:
  - key: route
    rate_limit: {name: per-route, unit: second, requests_per_unit: 100}
`))
	c := s.Client()
	now := time.Now().Add(time.Minute).Truncate(time.Second)
	if err := c.Do(ctx(t), "DEBUG", "CLOCK", "SET", now.UnixNano()).Err(); err != nil {
		t.Fatal(err)
	}
	advance := func(d time.Duration) {
		t.Helper()
		if err := c.Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", int64(d)).Err(); err != nil {
			t.Fatal(err)
		}
		now = now.Add(d)
	}
	envoy := newRLQSHolder(t, rlqsConn(t, grpcAddr), context.Background(), "edge", map[string]string{"route": "/api"})
	rate := func() uint32 {
		return envoy.Last.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket().GetTokensPerFill().GetValue()
	}
	envoy.Denied = 200
	if err := envoy.report(0, time.Second); err != nil || rate() != 100 {
		t.Fatalf("the Envoy alone: %s (%d a second), %v", envoy.Describe(), rate(), err)
	}

	shares, err := httplimit.WithShares(httplimit.Rules{Domain: "edge", Descriptors: func(_ *http.Request, key string) [][]httplimit.Entry {
		return [][]httplimit.Entry{{{Key: "route", Value: key}}}
	}}, httplimit.ShareOptions{Holder: "go-1", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Client: c, Key: func(*http.Request) string { return "/api" }, Limit: shares, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	t.Cleanup(srv.Close)
	get := func() int {
		t.Helper()
		r, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode
	}
	reports := func(n int64) {
		t.Helper()
		eventually(t, "the Go service's report", func() bool { return commandCalls(t, c, "rl.share") >= n })
	}
	// Its first request is checked per request (the Envoy's share is in
	// force, not yet charged: it passes) and its share asked for: nothing
	// is free while the Envoy holds the whole rate.
	get()
	reports(1)
	for range 50 {
		get() // refused: asked for
	}
	// A second later it asks for its 50 a second, and the Envoy for its
	// 200: the Envoy's part shrinks to 200/251 of the rate.
	advance(time.Second)
	get()
	reports(2)
	envoy.Denied = 200
	if err := envoy.report(time.Second, time.Second); err != nil || rate() < 70 || rate() >= 90 {
		t.Fatalf("the Envoy beside the Go service: %s (%d a second), %v", envoy.Describe(), rate(), err)
	}
	for range 50 {
		get()
	}
	// The Go service's next report finds the rest freed.
	advance(time.Second)
	checks := commandCalls(t, c, "rl.check")
	get()
	reports(3)
	admitted := 0
	for range 100 {
		if get() == http.StatusOK {
			admitted++
		}
	}
	if n := commandCalls(t, c, "rl.check"); n != checks {
		t.Fatalf("%d RL.CHECK calls while the Go service asked for a share: not decided in process", n-checks)
	}
	// Its burst is its part of 10 (2; the Envoy's is 8): what it admits at
	// one instant; the rest waits for its bucket to refill.
	if admitted != 2 {
		t.Fatalf("the Go service admitted %d at one instant from its share, want its burst of 2", admitted)
	}
	if err := shares.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
