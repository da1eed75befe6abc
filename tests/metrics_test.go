package tests

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The Prometheus endpoint counts commands and refusals by command name,
// never by key.
func TestMetricsEndpoint(t *testing.T) {
	metricsAddr := freeAddr(t)
	s := StartServer(t, "--metrics-addr", metricsAddr)
	c := s.Client()
	setClock(t, c, future)
	for range 3 {
		c.Do(ctx(t), "CL.THROTTLE", "metrics-key", 1, 1, 60) // the third is refused
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`sluice_commands_total{command="cl.throttle"} 3`,
		`sluice_limited_total{command="cl.throttle"} 1`,
		"sluice_connected_clients ",
		"sluice_keys 1",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, "metrics-key") {
		t.Error("a rate-limit key appears in the metrics")
	}
}
