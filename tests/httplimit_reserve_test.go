package tests

import (
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/httplimit"
)

// httplimit.Reserve around a handler whose cost is known at its end: the
// estimate is reserved before it runs, settled with what it reports (the
// rest given back, the excess charged), at the estimate when it reports
// nothing, and cancelled when it panics.
func TestHTTPLimitReserveSettles(t *testing.T) {
	s := StartServer(t, "--rules", writeRules(t, "llm.yaml", reserveRules))
	c := s.Client()
	setClock(t, c, future)
	mw, err := httplimit.New(httplimit.Config{
		Client: c,
		Key:    func(r *http.Request) string { return r.Header.Get("X-Tenant") },
		Limit: httplimit.Reserve{
			Domain: "llm",
			Descriptors: func(_ *http.Request, tenant string) [][]httplimit.Entry {
				return [][]httplimit.Entry{{{Key: "tenant", Value: tenant}}}
			},
			Estimate: func(r *http.Request) int64 {
				n, _ := strconv.ParseInt(r.Header.Get("X-Max-Tokens"), 10, 64)
				return n
			},
			TTL: time.Minute,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch v := r.URL.Query().Get("used"); v {
		case "panic":
			panic(http.ErrAbortHandler) // the response fails midway
		case "":
		default:
			n, _ := strconv.ParseInt(v, 10, 64)
			httplimit.ReportCost(r.Context(), n)
		}
		w.Write([]byte("ok"))
	})))
	srv.Config.ErrorLog = log.New(discard{}, "", 0)
	srv.Start()
	defer srv.Close()
	remaining := func() int64 {
		return checkInts(t, c, "RL.CHECK", "llm", "COST", 0, "DESCRIPTOR", "tenant", "acme")[2]
	}
	get := func(query, maxTokens string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, srv.URL+"/?"+query, nil)
		req.Header.Set("X-Tenant", "acme")
		req.Header.Set("X-Max-Tokens", maxTokens)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}
	for _, tc := range []struct {
		query, estimate string
		left            int64
	}{
		{"used=312", "2000", 100000 - 312},         // settled below: the rest back
		{"used=5000", "1000", 100000 - 312 - 5000}, // settled above: the excess charged
		{"", "700", 100000 - 312 - 5000 - 700},     // nothing reported: the estimate
		{"used=panic", "900", 100000 - 312 - 5000 - 700},
	} {
		get(tc.query, tc.estimate)
		eventually(t, "the settle of "+tc.query, func() bool { return remaining() == tc.left })
		info, _ := c.Info(ctx(t), "stats").Result()
		if !containsLine(info, "reservations_held:0") {
			t.Fatalf("after %s a reservation is still held:\n%s", tc.query, info)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func containsLine(text, line string) bool {
	return slices.Contains(strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n"), line)
}
