package tests

import (
	"net/http"
	"strings"
	"testing"
)

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return r.StatusCode
}

// /healthz is the process, /readyz whether it can decide; the profiler
// only with --pprof.
func TestHealthReadyAndPprof(t *testing.T) {
	httpAddr := freeAddr(t)
	StartServer(t, "--http-addr", httpAddr)
	if httpStatus(t, "http://"+httpAddr+"/healthz") != 200 || httpStatus(t, "http://"+httpAddr+"/readyz") != 200 {
		t.Fatal("a single node is healthy and ready")
	}
	if got := httpStatus(t, "http://"+httpAddr+"/debug/pprof/"); got != 404 {
		t.Fatalf("/debug/pprof/ without --pprof: %d", got)
	}
	withPprof := freeAddr(t)
	StartServer(t, "--http-addr", withPprof, "--pprof")
	if got := httpStatus(t, "http://"+withPprof+"/debug/pprof/"); got != 200 {
		t.Fatalf("/debug/pprof/ with --pprof: %d", got)
	}
	// With a password the profiler asks for it: its cmdline would show it.
	locked := freeAddr(t)
	StartServer(t, "--http-addr", locked, "--pprof", "--requirepass", "s3cret")
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol"} {
		if r := httpGet(t, "http://"+locked+path); r.status != 401 || strings.Contains(r.body, "s3cret") {
			t.Fatalf("%s without the password: %d %q", path, r.status, r.body)
		}
	}
	if r := httpGet(t, "http://"+locked+"/debug/pprof/cmdline", "Authorization", "Bearer s3cret"); r.status != 200 || !strings.Contains(r.body, "--pprof") {
		t.Fatalf("/debug/pprof/cmdline with the password: %d %q", r.status, r.body)
	}

	// A cluster member is ready while it hears from a leader; with the
	// other two gone it is alive but not ready.
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cl := StartCluster(t, 3, func(i int, _ []string) []string { return []string{"--http-addr", addrs[i]} })
	leader := cl.Leader()
	for i := range cl.Nodes {
		eventually(t, "every member ready", func() bool { return httpStatus(t, "http://"+addrs[i]+"/readyz") == 200 })
	}
	follower := cl.Followers(leader)[0]
	other := cl.Followers(leader)[1]
	leader.Kill()
	other.Kill()
	fa := addrs[indexOf(cl, follower)]
	eventually(t, "the lone member not ready", func() bool { return httpStatus(t, "http://"+fa+"/readyz") == 503 })
	if httpStatus(t, "http://"+fa+"/healthz") != 200 {
		t.Fatal("the lone member's process is up: /healthz 200")
	}
}
