package tests

import (
	"net/http"
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
