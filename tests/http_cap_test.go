package tests

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issue #43: at the HTTP door's cap no request is charged whose caller got
// no answer. 400 clients, each on its own keep-alive connection, post
// /json to a door capped at 64 connections for 4 s: connections are
// closed for newer ones and new ones refused (503), but only idle ones
// are closed — so the limit's counter equals exactly the OK answers the
// callers received.
func TestHTTPDoorAtItsCapLosesNoAnswer(t *testing.T) {
	rules := writeRules(t, "cap.yaml", "domain: cap\ndescriptors:\n  - key: path\n    rate_limit: {unit: day, requests_per_unit: 100000000}\n")
	httpAddr := freeAddr(t)
	s := StartServer(t, "--rules", rules, "--http-addr", httpAddr, "--http-max-conns", "64")
	body := `{"domain":"cap","descriptors":[{"entries":[{"key":"path","value":"/x"}]}]}`

	var ok, refused, failed atomic.Int64
	stop := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	for range 400 {
		wg.Go(func() {
			tr := &http.Transport{MaxConnsPerHost: 1, DisableCompression: true}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for time.Now().Before(stop) {
				req, _ := http.NewRequestWithContext(context.Background(), "POST", "http://"+httpAddr+"/json", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				r, err := c.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				b, _ := io.ReadAll(r.Body)
				r.Body.Close()
				switch r.StatusCode {
				case 200:
					ok.Add(1)
				case 503:
					refused.Add(1)
				default:
					t.Errorf("POST /json: %d %s", r.StatusCode, b)
					return
				}
			}
		})
	}
	wg.Wait()
	reply, err := s.Client().Do(ctx(t), "RL.CHECK", "cap", "COST", 0, "DESCRIPTOR", "path", "/x").Slice()
	if err != nil {
		t.Fatal(err)
	}
	charged := reply[1].(int64) - reply[2].(int64)
	t.Logf("answered OK %d, refused 503 %d, failed at the transport %d; charged %d", ok.Load(), refused.Load(), failed.Load(), charged)
	if ok.Load() == 0 || refused.Load()+failed.Load() == 0 {
		t.Fatalf("the door was not driven past its cap: %d OK, %d refused, %d failed", ok.Load(), refused.Load(), failed.Load())
	}
	if charged != ok.Load() {
		t.Fatalf("%d charged but %d callers were answered OK: %d charged requests lost their answer", charged, ok.Load(), charged-ok.Load())
	}
}
