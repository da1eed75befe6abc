package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/sluice-rl/sluice/httplimit"
)

// httpReply is one response, read to its end.
type httpReply struct {
	status int
	header http.Header
	body   string
}

func httpGet(t *testing.T, url string, header ...string) httpReply {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return httpReply{resp.StatusCode, resp.Header, string(body)}
}

// problemBody is the JSON body of a 429 (or a fail-closed answer).
type problemBody struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	ViolatedPolicies []string `json:"violated-policies"`
	RetryAfter       int64    `json:"retry-after"`
}

// mustProblem checks a refusal's status, its JSON body and that the body
// repeats Retry-After; it returns Retry-After.
func mustProblem(t *testing.T, r httpReply, status int) (problemBody, int64) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d (body %q)", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p problemBody
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("body %q is not JSON: %v", r.body, err)
	}
	if p.Status != status {
		t.Fatalf("body status %d, want %d", p.Status, status)
	}
	ra, err := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
	if err != nil || ra < 1 {
		t.Fatalf("Retry-After %q, want an integer >= 1", r.header.Get("Retry-After"))
	}
	if p.RetryAfter != ra {
		t.Fatalf("body retry-after %d, header Retry-After %d", p.RetryAfter, ra)
	}
	return p, ra
}

// rateLimit parses `"name";r=R;t=T` into its parts.
func rateLimit(t *testing.T, h http.Header) (name string, r, reset int64) {
	t.Helper()
	v := h.Get("RateLimit")
	parts := strings.Split(v, ";")
	if len(parts) != 3 || !strings.HasPrefix(parts[1], "r=") || !strings.HasPrefix(parts[2], "t=") {
		t.Fatalf("RateLimit %q, want \"name\";r=R;t=T", v)
	}
	name, err := strconv.Unquote(parts[0])
	if err != nil {
		t.Fatalf("RateLimit %q: name is not a string: %v", v, err)
	}
	r, err1 := strconv.ParseInt(parts[1][2:], 10, 64)
	reset, err2 := strconv.ParseInt(parts[2][2:], 10, 64)
	if err1 != nil || err2 != nil || r < 0 || reset < 0 {
		t.Fatalf("RateLimit %q: r and t must be non-negative integers", v)
	}
	return name, r, reset
}

// limitedServer serves "ok" behind the middleware built from cfg; Client
// defaults to a go-redis client of s that does not retry (a retry cannot
// fit in a request's budget), Timeout to 10 s (the machine is shared: the
// test of the timeout sets its own).
func limitedServer(t *testing.T, s *Server, cfg httplimit.Config) (*httptest.Server, *httplimit.Middleware) {
	t.Helper()
	if cfg.Client == nil {
		cfg.Client = s.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	m, err := httplimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})))
	t.Cleanup(srv.Close)
	return srv, m
}

// keyByUser limits by the X-User header; requests without one are not
// limited.
func keyByUser(r *http.Request) string {
	if u := r.Header.Get("X-User"); u != "" {
		return "user:" + u
	}
	return ""
}

// The headers on 200 and on 429, against the sliding window: r counts down
// with each request, the refusal says when to come back, and the wait it
// names is exactly right on the debug clock.
func TestHTTPLimitHeaders(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	const limit = 3
	srv, _ := limitedServer(t, s, httplimit.Config{
		Key:   keyByUser,
		Limit: httplimit.SlidingWindow{Limit: limit, Window: time.Minute},
	})
	for i := range limit {
		r := httpGet(t, srv.URL, "X-User", "ann")
		if r.status != 200 || r.body != "ok" {
			t.Fatalf("request %d: %d %q, want 200 ok", i+1, r.status, r.body)
		}
		if got, want := r.header.Get("RateLimit-Policy"), fmt.Sprintf(`"default";q=%d;w=60`, limit); got != want {
			t.Fatalf("RateLimit-Policy %q, want %q", got, want)
		}
		name, rem, reset := rateLimit(t, r.header)
		// The same state, asked directly with a peek, gives reset_after.
		peek := ints(t, c.Do(ctx(t), "SW.CHECK", "user:ann", limit, 60, "COST", 0))
		if name != "default" || rem != int64(limit-1-i) || reset != peek[4] {
			t.Fatalf("request %d: RateLimit %q, want r=%d t=%d", i+1, r.header.Get("RateLimit"), limit-1-i, peek[4])
		}
		if r.header.Get("Retry-After") != "" {
			t.Fatalf("request %d: Retry-After %q on a 200", i+1, r.header.Get("Retry-After"))
		}
	}
	refused := httpGet(t, srv.URL, "X-User", "ann")
	p, retry := mustProblem(t, refused, http.StatusTooManyRequests)
	if !strings.HasSuffix(p.Type, "#quota-exceeded") || fmt.Sprint(p.ViolatedPolicies) != "[default]" {
		t.Fatalf("problem %+v, want the quota-exceeded type naming policy default", p)
	}
	_, rem, reset := rateLimit(t, refused.header)
	if rem != 0 || reset != retry {
		t.Fatalf("refusal: RateLimit %q with Retry-After %d, want r=0 and t equal to Retry-After (no jitter)", refused.header.Get("RateLimit"), retry)
	}
	if refused.header.Get("RateLimit-Policy") == "" {
		t.Fatal("a 429 without RateLimit-Policy")
	}
	// Another key is untouched; a request without a key is not limited.
	if r := httpGet(t, srv.URL, "X-User", "bob"); r.status != 200 {
		t.Fatalf("another user: %d", r.status)
	}
	if r := httpGet(t, srv.URL); r.status != 200 || r.header.Get("RateLimit") != "" {
		t.Fatalf("no key: %d with RateLimit %q, want 200 without headers", r.status, r.header.Get("RateLimit"))
	}
	// Retry-After is the truth: one second early is still refused, on
	// time passes.
	advance(t, c, time.Duration(retry-1)*time.Second)
	if r := httpGet(t, srv.URL, "X-User", "ann"); r.status != http.StatusTooManyRequests {
		t.Fatalf("one second before Retry-After: %d, want 429", r.status)
	}
	advance(t, c, time.Second)
	if r := httpGet(t, srv.URL, "X-User", "ann"); r.status != 200 {
		t.Fatalf("at Retry-After: %d %q, want 200", r.status, r.body)
	}
}

// The legacy X-RateLimit-* family is sent beside the draft pair by
// default, its reset a Unix second; either family can be switched off.
func TestHTTPLimitLegacyHeaders(t *testing.T) {
	s := StartServer(t)
	setClock(t, s.Client(), future)
	wall := time.Unix(1_900_000_000, 0)
	srv, _ := limitedServer(t, s, httplimit.Config{
		Key: keyByUser, Limit: httplimit.FixedWindow{Limit: 5, Window: time.Minute},
		Now: func() time.Time { return wall },
	})
	r := httpGet(t, srv.URL, "X-User", "leg")
	_, _, reset := rateLimit(t, r.header)
	if r.header.Get("X-RateLimit-Limit") != "5" || r.header.Get("X-RateLimit-Remaining") != "4" ||
		r.header.Get("X-RateLimit-Reset") != strconv.FormatInt(wall.Unix()+reset, 10) {
		t.Fatalf("legacy headers: %v", r.header)
	}
	for _, tc := range []struct {
		cfg           httplimit.Config
		legacy, draft bool
	}{
		{httplimit.Config{NoLegacyHeaders: true}, false, true},
		{httplimit.Config{NoDraftHeaders: true}, true, false},
	} {
		tc.cfg.Key, tc.cfg.Limit = keyByUser, httplimit.FixedWindow{Limit: 5, Window: time.Minute}
		srv, _ := limitedServer(t, s, tc.cfg)
		r := httpGet(t, srv.URL, "X-User", "fam")
		if (r.header.Get("X-RateLimit-Limit") != "") != tc.legacy || (r.header.Get("RateLimit") != "") != tc.draft {
			t.Fatalf("%+v: headers %v", tc.cfg, r.header)
		}
	}
}

// A refusal whose reply says retry_after 0 (the wait is under a
// millisecond) still gets Retry-After 1; jitter only ever adds.
func TestHTTPLimitRetryAfterAtLeastOne(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	gcra := httplimit.GCRA{Burst: 0, Count: 10000, Period: time.Second} // one per 100 µs
	// The reply itself, on a key of its own at the same instant.
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "probe", 0, 10000, 1))
	if got := ints(t, c.Do(ctx(t), "CL.THROTTLE", "probe", 0, 10000, 1)); got[0] != 1 || got[3] != 0 {
		t.Fatalf("CL.THROTTLE reply %v: want a refusal with retry_after 0", got)
	}
	plain, _ := limitedServer(t, s, httplimit.Config{Key: keyByUser, Limit: gcra})
	if r := httpGet(t, plain.URL, "X-User", "a"); r.status != 200 {
		t.Fatalf("first request: %d", r.status)
	}
	r := httpGet(t, plain.URL, "X-User", "a")
	if _, retry := mustProblem(t, r, http.StatusTooManyRequests); retry != 1 {
		t.Fatalf("Retry-After %d, want 1 for a reply of 0 without jitter", retry)
	}
	if _, _, reset := rateLimit(t, r.header); reset != 1 {
		t.Fatalf("RateLimit %q, want t=1", r.header.Get("RateLimit"))
	}
	// Burst 0 at 10000/s: one unit, refilled within a second.
	if got := r.header.Get("RateLimit-Policy"); got != `"default";q=1;w=1` {
		t.Fatalf("RateLimit-Policy %q", got)
	}

	// Jitter: the most the pinned source can give is added to Retry-After,
	// never to t (Retry-After must not name an instant before t).
	var asked atomic.Int64
	jittered, _ := limitedServer(t, s, httplimit.Config{
		Key: keyByUser, Limit: gcra, Name: "burst", Jitter: 3 * time.Second,
		Rand: func(n int64) int64 { asked.Store(n); return n - 1 },
	})
	httpGet(t, jittered.URL, "X-User", "b")
	r = httpGet(t, jittered.URL, "X-User", "b")
	p, retry := mustProblem(t, r, http.StatusTooManyRequests)
	if retry != 4 || asked.Load() != 4 {
		t.Fatalf("Retry-After %d with jitter up to 3 s (rand asked for [0,%d)), want 1+3", retry, asked.Load())
	}
	if name, _, reset := rateLimit(t, r.header); name != "burst" || reset != 1 || fmt.Sprint(p.ViolatedPolicies) != "[burst]" {
		t.Fatalf("RateLimit %q, policies %v: want policy burst with t=1", r.header.Get("RateLimit"), p.ViolatedPolicies)
	}
}

// With sluice gone, a fail-open middleware serves the request without
// rate-limit headers and a fail-closed one answers 503 with a JSON body.
func TestHTTPLimitFailOpenAndClosed(t *testing.T) {
	s := StartServer(t)
	var errs []error
	var mu sync.Mutex
	onError := func(_ *http.Request, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
	open, _ := limitedServer(t, s, httplimit.Config{Key: keyByUser, Limit: httplimit.FixedWindow{Limit: 1, Window: time.Minute}, OnError: onError})
	closed, _ := limitedServer(t, s, httplimit.Config{Key: keyByUser, Limit: httplimit.FixedWindow{Limit: 1, Window: time.Minute}, OnFailure: httplimit.FailClosed, OnError: onError})
	// Alive: both limit.
	for _, srv := range []*httptest.Server{open, closed} {
		httpGet(t, srv.URL, "X-User", "u")
		if r := httpGet(t, srv.URL, "X-User", "u"); r.status != http.StatusTooManyRequests {
			t.Fatalf("second request with sluice up: %d, want 429", r.status)
		}
	}
	s.Kill()
	r := httpGet(t, open.URL, "X-User", "u")
	if r.status != 200 || r.body != "ok" || r.header.Get("RateLimit") != "" || r.header.Get("RateLimit-Policy") != "" {
		t.Fatalf("fail open: %d %q RateLimit %q, want 200 ok without rate-limit headers", r.status, r.body, r.header.Get("RateLimit"))
	}
	r = httpGet(t, closed.URL, "X-User", "u")
	if p, _ := mustProblem(t, r, http.StatusServiceUnavailable); r.body == "ok" || p.Type != "about:blank" {
		t.Fatalf("fail closed: %+v", p)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 2 {
		t.Fatalf("OnError saw %d errors, want 2: %v", len(errs), errs)
	}
	for _, err := range errs {
		if errors.Is(err, httplimit.ErrTimeout) || errors.Is(err, httplimit.ErrBreakerOpen) {
			t.Fatalf("a dead sluice refuses connections at once, got %v", err)
		}
	}
}

// commandCounter counts the commands a go-redis client sends (or tries to).
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// The breaker opens after Failures failed calls, stops calling sluice while
// open, and closes again once sluice answers a probe.
func TestHTTPLimitBreaker(t *testing.T) {
	s := StartServer(t)
	client := s.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	var sent commandCounter
	client.AddHook(&sent)
	srv, m := limitedServer(t, s, httplimit.Config{
		Client: client, Key: keyByUser,
		Limit:   httplimit.SlidingWindow{Limit: 100, Window: time.Minute},
		Breaker: httplimit.BreakerConfig{Failures: 3, OpenFor: 100 * time.Millisecond},
	})
	if r := httpGet(t, srv.URL, "X-User", "u"); r.header.Get("RateLimit") == "" || m.BreakerState() != "closed" {
		t.Fatalf("sluice up: RateLimit %q, breaker %s", r.header.Get("RateLimit"), m.BreakerState())
	}
	s.Kill()
	for i := range 3 {
		if m.BreakerState() != "closed" {
			t.Fatalf("breaker %s after %d failures, want closed until 3", m.BreakerState(), i)
		}
		if r := httpGet(t, srv.URL, "X-User", "u"); r.status != 200 || r.header.Get("RateLimit") != "" {
			t.Fatalf("failure %d: %d RateLimit %q, want fail open", i+1, r.status, r.header.Get("RateLimit"))
		}
	}
	// OpenFor is short, so only what the breaker did before it elapsed is
	// certain: it opened on the third failure.
	before := sent.n.Load()
	if st := m.BreakerState(); st != "open" && st != "half-open" {
		t.Fatalf("breaker %s after 3 failures, want open", st)
	}
	s.Start() // same address, sluice back
	eventually(t, "breaker closes once sluice answers", func() bool {
		r := httpGet(t, srv.URL, "X-User", "u")
		return m.BreakerState() == "closed" && r.header.Get("RateLimit") != ""
	})
	if sent.n.Load() <= before {
		t.Fatal("no command reached sluice after it came back")
	}
}

// While the breaker is open no request reaches sluice at all.
func TestHTTPLimitBreakerOpenSendsNothing(t *testing.T) {
	s := StartServer(t)
	client := s.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	var sent commandCounter
	client.AddHook(&sent)
	var errs atomic.Int64
	srv, m := limitedServer(t, s, httplimit.Config{
		Client: client, Key: keyByUser,
		Limit:     httplimit.SlidingWindow{Limit: 100, Window: time.Minute},
		OnFailure: httplimit.FailClosed,
		Breaker:   httplimit.BreakerConfig{Failures: 2, OpenFor: time.Hour},
		OnError: func(_ *http.Request, err error) {
			if errors.Is(err, httplimit.ErrBreakerOpen) {
				errs.Add(1)
			}
		},
	})
	s.Kill()
	httpGet(t, srv.URL, "X-User", "u")
	httpGet(t, srv.URL, "X-User", "u")
	if m.BreakerState() != "open" {
		t.Fatalf("breaker %s after 2 failures, want open", m.BreakerState())
	}
	before := sent.n.Load()
	for range 10 {
		mustProblem(t, httpGet(t, srv.URL, "X-User", "u"), http.StatusServiceUnavailable)
	}
	if sent.n.Load() != before || errs.Load() != 10 {
		t.Fatalf("open breaker: %d commands sent, %d ErrBreakerOpen; want 0 and 10", sent.n.Load()-before, errs.Load())
	}
}

// blackhole accepts connections and never answers: a sluice that hangs.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// A sluice that never answers costs a request Timeout, not the client's
// own (minute-long) timeouts, and counts as a breaker failure.
func TestHTTPLimitTimeout(t *testing.T) {
	addr := blackhole(t)
	client := redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, MaxRetries: -1,
		DialTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
	})
	t.Cleanup(func() { client.Close() })
	var timeouts atomic.Int64
	srv, m := limitedServer(t, nil, httplimit.Config{
		Client: client, Key: keyByUser,
		Limit:     httplimit.SlidingWindow{Limit: 5, Window: time.Minute},
		Timeout:   50 * time.Millisecond,
		OnFailure: httplimit.FailClosed,
		Breaker:   httplimit.BreakerConfig{Failures: 2, OpenFor: time.Hour},
		OnError: func(_ *http.Request, err error) {
			if errors.Is(err, httplimit.ErrTimeout) {
				timeouts.Add(1)
			}
		},
	})
	for i := range 2 {
		start := time.Now()
		mustProblem(t, httpGet(t, srv.URL, "X-User", "u"), http.StatusServiceUnavailable)
		// Bounded far below the client's minute so a loaded machine cannot
		// fail it; the exact error is checked below.
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("request %d took %v against a hung sluice", i+1, d)
		}
	}
	if timeouts.Load() != 2 || m.BreakerState() != "open" {
		t.Fatalf("%d ErrTimeout, breaker %s; want 2 and open", timeouts.Load(), m.BreakerState())
	}
}

// CONC.ACQUIRE before the handler, CONC.RELEASE after: a second request
// while the first runs is refused, and the slot is back once it ended.
func TestHTTPLimitConcurrency(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	m, err := httplimit.New(httplimit.Config{
		Client: s.Client(func(o *redis.Options) { o.MaxRetries = -1 }), Key: keyByUser, Timeout: 10 * time.Second,
		Limit: httplimit.Concurrency{Limit: 1, Lease: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	entered, leave := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-leave
		}
		io.WriteString(w, "ok")
	})))
	t.Cleanup(srv.Close)
	first := make(chan httpReply, 1)
	go func() { first <- httpGet(t, srv.URL+"/slow", "X-User", "u") }()
	<-entered
	if got := ints(t, c.Do(ctx(t), "CONC.GET", "user:u")); got[0] != 1 {
		t.Fatalf("CONC.GET while the handler runs: %v, want one lease", got)
	}
	r := httpGet(t, srv.URL, "X-User", "u")
	mustProblem(t, r, http.StatusTooManyRequests)
	if got := r.header.Get("RateLimit-Policy"); got != `"default";q=1;qu="concurrent-requests"` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
	close(leave)
	if r := <-first; r.status != 200 {
		t.Fatalf("the slow request: %d", r.status)
	}
	if got := ints(t, c.Do(ctx(t), "CONC.GET", "user:u")); got[0] != 0 {
		t.Fatalf("CONC.GET after the handler returned: %v, want no lease", got)
	}
	if r := httpGet(t, srv.URL, "X-User", "u"); r.status != 200 {
		t.Fatalf("after the release: %d", r.status)
	}
}

// The example server, built and run as a user would: GET / admits 5
// requests per 60 s per client address, and the refusal's Retry-After is
// honest on the debug clock.
func TestHTTPLimitExample(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	bin := filepath.Join(t.TempDir(), "httplimit-example")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/httplimit").CombinedOutput(); err != nil {
		t.Fatalf("build the example: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--sluice-addr", s.Addr, "--listen", addr, "--sluice-timeout", "10s")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	eventually(t, "the example listens", func() bool {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	url := "http://" + addr + "/"
	for i := range 5 {
		r := httpGet(t, url)
		if r.status != 200 {
			t.Fatalf("request %d: %d %q", i+1, r.status, r.body)
		}
		if got := r.header.Get("RateLimit-Policy"); got != `"per-client";q=5;w=60` {
			t.Fatalf("RateLimit-Policy %q", got)
		}
		if _, rem, _ := rateLimit(t, r.header); rem != int64(4-i) {
			t.Fatalf("request %d: RateLimit %q, want r=%d", i+1, r.header.Get("RateLimit"), 4-i)
		}
	}
	refused := httpGet(t, url)
	_, retry := mustProblem(t, refused, http.StatusTooManyRequests)
	_, _, wait := rateLimit(t, refused.header)
	if retry < wait || retry > wait+2 {
		t.Fatalf("Retry-After %d, want t=%d plus at most 2 s of jitter", retry, wait)
	}
	// Only GET / is limited.
	if r := httpGet(t, "http://"+addr+"/other"); r.status != http.StatusNotFound || r.header.Get("RateLimit") != "" {
		t.Fatalf("/other: %d RateLimit %q", r.status, r.header.Get("RateLimit"))
	}
	advance(t, c, time.Duration(wait-1)*time.Second)
	if r := httpGet(t, url); r.status != http.StatusTooManyRequests {
		t.Fatalf("one second before t: %d, want 429", r.status)
	}
	advance(t, c, time.Second)
	if r := httpGet(t, url); r.status != 200 {
		t.Fatalf("at t: %d, want 200", r.status)
	}
}

// An error reply (here WRONGTYPE: the key belongs to another limiter)
// fails that request as configured but proves sluice is up: it never
// opens the breaker.
func TestHTTPLimitErrorReplyKeepsBreakerClosed(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "user:g", 1, 1, 60))
	var replies atomic.Int64
	srv, m := limitedServer(t, s, httplimit.Config{
		Key: keyByUser, Limit: httplimit.SlidingWindow{Limit: 5, Window: time.Minute},
		OnFailure: httplimit.FailClosed,
		Breaker:   httplimit.BreakerConfig{Failures: 2, OpenFor: time.Hour},
		OnError: func(_ *http.Request, err error) {
			if strings.HasPrefix(err.Error(), "WRONGTYPE") {
				replies.Add(1)
			}
		},
	})
	for range 5 {
		mustProblem(t, httpGet(t, srv.URL, "X-User", "g"), http.StatusServiceUnavailable)
	}
	if replies.Load() != 5 || m.BreakerState() != "closed" {
		t.Fatalf("%d WRONGTYPE replies, breaker %s; want 5 and closed", replies.Load(), m.BreakerState())
	}
	if r := httpGet(t, srv.URL, "X-User", "other"); r.status != 200 || r.header.Get("RateLimit") == "" {
		t.Fatalf("another key: %d RateLimit %q", r.status, r.header.Get("RateLimit"))
	}
}

// The middleware's metrics count decisions and failures by outcome and
// policy; no label ever carries a key.
func TestHTTPLimitMetrics(t *testing.T) {
	s := StartServer(t)
	reg := prometheus.NewRegistry()
	srv, _ := limitedServer(t, s, httplimit.Config{
		Key: keyByUser, Limit: httplimit.FixedWindow{Limit: 2, Window: time.Minute},
		Name: "api", Metrics: reg,
	})
	for range 3 {
		httpGet(t, srv.URL, "X-User", "secret-user-id")
	}
	s.Kill()
	httpGet(t, srv.URL, "X-User", "secret-user-id")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "secret-user-id") {
					t.Fatalf("%s has a key in label %s=%q", name, l.GetName(), l.GetValue())
				}
				if l.GetName() != "policy" {
					name += "," + l.GetName() + "=" + l.GetValue()
				} else if l.GetValue() != "api" {
					t.Fatalf("%s: policy label %q, want api", f.GetName(), l.GetValue())
				}
			}
			switch {
			case m.Counter != nil:
				got[name] = m.Counter.GetValue()
			case m.Histogram != nil:
				got[name] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	for name, want := range map[string]float64{
		"sluice_httplimit_requests_total,decision=allowed":              2,
		"sluice_httplimit_requests_total,decision=limited":              1,
		"sluice_httplimit_requests_total,decision=failed_open":          1,
		"sluice_httplimit_failures_total,call=check,reason=unreachable": 1,
		"sluice_httplimit_check_seconds":                                4,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], want, got)
		}
	}
}

// QUOTA.CHECK through the middleware, with an anchor and a zone: the
// refusal waits for the period's end, which the debug clock reaches.
func TestHTTPLimitQuota(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	srv, _ := limitedServer(t, s, httplimit.Config{
		Key: keyByUser,
		Limit: httplimit.Quota{Limit: 2, Period: "day", Anchor: time.Unix(future/1e9-3600, 0),
			TZ: "Europe/Berlin", Cost: 1},
	})
	for i := range 2 {
		r := httpGet(t, srv.URL, "X-User", "q")
		if r.status != 200 || r.header.Get("RateLimit-Policy") != `"default";q=2;w=86400` {
			t.Fatalf("request %d: %d RateLimit-Policy %q", i+1, r.status, r.header.Get("RateLimit-Policy"))
		}
	}
	r := httpGet(t, srv.URL, "X-User", "q")
	_, retry := mustProblem(t, r, http.StatusTooManyRequests)
	// The period started at the anchor's time of day, an hour ago.
	if retry != 23*3600 {
		t.Fatalf("Retry-After %d, want the 23 h left of the day", retry)
	}
	advance(t, c, time.Duration(retry)*time.Second)
	if r := httpGet(t, srv.URL, "X-User", "q"); r.status != 200 {
		t.Fatalf("next period: %d", r.status)
	}
}

// The middleware over RL.CHECK: the binding rule names the policy, its
// window is "w", a refusal by one rule charges none, and a request no rule
// matches carries no headers.
func TestHTTPLimitRules(t *testing.T) {
	s := StartServer(t, "--rules", writeRules(t, "web.yaml", `domain: web
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: minute, requests_per_unit: 5}
  - key: path
    value: /search
    rate_limit: {name: search, unit: minute, requests_per_unit: 2}
`))
	c := s.Client()
	setClock(t, c, future)
	srv, _ := limitedServer(t, s, httplimit.Config{
		Key: keyByUser,
		Limit: httplimit.Rules{Domain: "web", Descriptors: func(r *http.Request, key string) [][]httplimit.Entry {
			if key == "" {
				return nil
			}
			return [][]httplimit.Entry{{{Key: "user", Value: key}}, {{Key: "path", Value: r.URL.Path}}}
		}},
	})
	for i := range 2 {
		r := httpGet(t, srv.URL+"/search", "X-User", "ann")
		if r.status != 200 || r.header.Get("RateLimit-Policy") != `"search";q=2;w=60` {
			t.Fatalf("search %d: %d %q", i, r.status, r.header.Get("RateLimit-Policy"))
		}
	}
	refused := httpGet(t, srv.URL+"/search", "X-User", "ann")
	if _, retry := mustProblem(t, refused, http.StatusTooManyRequests); retry < 1 {
		t.Fatalf("Retry-After %d", retry)
	}
	// Two searches charged the user limit; the refusal did not.
	r := httpGet(t, srv.URL+"/home", "X-User", "ann")
	if name, rem, _ := rateLimit(t, r.header); r.status != 200 || name != "per-user" || rem != 2 {
		t.Fatalf("home: %d %q, want per-user with 2 left", r.status, r.header.Get("RateLimit"))
	}
	if r := httpGet(t, srv.URL+"/home"); r.status != 200 || r.header.Get("RateLimit-Policy") != "" {
		t.Fatalf("no descriptors: %d %q", r.status, r.header.Get("RateLimit-Policy"))
	}
}
