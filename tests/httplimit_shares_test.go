package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
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
	// The server's clock and the Go service's, moved together (the
	// service reads it from its report goroutines too).
	var clock atomic.Int64
	clock.Store(time.Now().Add(time.Minute).Truncate(time.Second).UnixNano())
	if err := c.Do(ctx(t), "DEBUG", "CLOCK", "SET", clock.Load()).Err(); err != nil {
		t.Fatal(err)
	}
	advance := func(d time.Duration) {
		t.Helper()
		if err := c.Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", int64(d)).Err(); err != nil {
			t.Fatal(err)
		}
		clock.Add(int64(d))
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
	}}, httplimit.ShareOptions{Holder: "go-1", Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Client: c, Key: func(*http.Request) string { return "/api" }, Limit: shares, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	t.Cleanup(srv.Close)
	admitted := 0 // requests the service let through
	get := func() {
		t.Helper()
		r, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode == http.StatusOK {
			admitted++
		}
	}
	// reported runs requests until one starts a report of the Go
	// service's, and sluice has taken it (RL.SHARE calls: the RLQS
	// door's count there too, so from the count before).
	reported := func() {
		t.Helper()
		before := commandCalls(t, c, "rl.share")
		// Again until one starts: the last report's answer may still be
		// on its way (one report at a time).
		eventually(t, "the Go service's report", func() bool {
			get()
			return commandCalls(t, c, "rl.share") > before
		})
	}
	// Its first request is checked per request (the Envoy's share is in
	// force, not yet charged: it passes) and its share asked for: nothing
	// is free while the Envoy holds the whole rate.
	reported()
	for range 50 {
		get() // refused: asked for
	}
	// A second later it asks for its 50 a second, and the Envoy for its
	// 200: the Envoy's part shrinks to 200/251 of the rate.
	advance(time.Second)
	reported()
	envoy.Denied = 200
	if err := envoy.report(time.Second, time.Second); err != nil || rate() < 40 || rate() >= 90 {
		t.Fatalf("the Envoy beside the Go service: %s (%d a second), %v", envoy.Describe(), rate(), err)
	}
	for range 50 {
		get()
	}
	// The Go service's next report finds the rest freed.
	advance(time.Second)
	checks := commandCalls(t, c, "rl.check")
	admitted = 0
	reported()
	// Once the share's reply is in (sluice took the report; the service
	// reads the answer a moment later), its burst passes, and no more at
	// this instant: at most what the Envoy's burst leaves of the rule's 10.
	eventually(t, "the Go service admits from its share", func() bool {
		get()
		return admitted >= 1
	})
	for range 50 {
		get()
	}
	if n := commandCalls(t, c, "rl.check"); n != checks {
		t.Fatalf("%d RL.CHECK calls while the Go service asked for a share: not decided in process", n-checks)
	}
	envoyBurst := int(envoy.Last.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket().GetMaxTokens())
	if admitted > 10-envoyBurst {
		t.Fatalf("the Go service admitted %d at one instant, past the %d the Envoy's burst of %d leaves", admitted, 10-envoyBurst, envoyBurst)
	}
	if err := shares.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
