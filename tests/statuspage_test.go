package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromium runs Debian's Chromium headless on url with flags, and returns
// its stdout and the page's console lines.
func chromium(t *testing.T, url string, flags ...string) (string, []string) {
	t.Helper()
	args := append([]string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0"}, flags...)
	cmd := exec.Command("chromium", append(args, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatalf("chromium: %v (.ci/run installs Debian's chromium)", err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chromium: %v\n%s", err, stderr.String())
		}
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatal("chromium did not finish in 90 s")
	}
	var console []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") {
			console = append(console, line)
		}
	}
	return stdout.String(), console
}

var domCounter = regexp.MustCompile(`data-updates="(\d+)"[^>]*data-total="(\d+)"|data-total="(\d+)"[^>]*data-updates="(\d+)"`)

// pageCounters reads how many times the page refreshed and the decisions
// total it last showed.
func pageCounters(t *testing.T, dom string) (updates, total int) {
	m := domCounter.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's body has no counters:\n%.2000s", dom)
	}
	if m[1] != "" {
		updates, _ = strconv.Atoi(m[1])
		total, _ = strconv.Atoi(m[2])
	} else {
		updates, _ = strconv.Atoi(m[4])
		total, _ = strconv.Atoi(m[3])
	}
	return updates, total
}

// The status page in a real headless Chromium: it loads with no console
// message, refreshes, its numbers move while traffic runs, and it renders
// (the screenshot the README shows: SLUICE_UPDATE_SCREENSHOT=1 writes
// docs/status.png).
func TestStatusPageInChromium(t *testing.T) {
	if os.Getenv("SLUICE_CHECK_DASHBOARDS") == "" {
		t.Skip("SLUICE_CHECK_DASHBOARDS is not set (scripts/check_dashboards.sh sets it)")
	}
	httpAddr := freeAddr(t)
	s := StartServer(t, "--http-addr", httpAddr, "--rules", "../examples/rules")
	c := s.Client()
	c.Do(ctx(t), "RL.OVERRIDE", "SET", "messaging", 20, "day", "DESCRIPTOR", "to_number", "2061111111")
	c.Do(ctx(t), "RL.SCALE", "SET", "messaging", "0.5")
	traffic, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		for i := 0; traffic.Err() == nil; i++ {
			c.Do(traffic, "CL.THROTTLE", fmt.Sprintf("user:%d", i%7), 3, 1, 60)
			c.Do(traffic, "RL.CHECK", "messaging", "DESCRIPTOR", "to_number", strconv.Itoa(i%3))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	url := "http://" + httpAddr + "/"
	dom1, console := chromium(t, url, "--virtual-time-budget=3000", "--dump-dom")
	if len(console) > 0 {
		t.Fatalf("the page wrote to the console:\n%s", strings.Join(console, "\n"))
	}
	u1, n1 := pageCounters(t, dom1)
	if u1 < 2 {
		t.Fatalf("the page refreshed %d times in 3 s", u1)
	}
	for _, want := range []string{"message_type=marketing/to_number", "examples/rules/messaging.yaml:", "to_number=2061111111", "0.500000", "user:",
		// The limit in force beside the configured one (scale 0.5 of 100 a
		// day), and the override that replaces it for one number.
		"<td class=\"n changed\">50</td><td class=\"n\">100</td>", "to_number=2061111111: 20/86400 s",
		// A node that never saved says so.
		"never"} {
		if !strings.Contains(dom1, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	if strings.Contains(dom1, "1970-01-01") {
		t.Error("the page shows 1970-01-01 for a node that never saved")
	}
	// At 1400 px no id, address, state or number breaks across lines:
	// the page is framed on one origin with a checker that measures every
	// cell not meant to wrap.
	if broken := brokenCells(t, httpAddr); broken != "[]" {
		t.Errorf("cells broken across lines at 1400 px: %s", broken)
	}
	eventually(t, "the page's numbers moving with the traffic", func() bool {
		dom2, _ := chromium(t, url, "--virtual-time-budget=1500", "--dump-dom")
		_, n2 := pageCounters(t, dom2)
		return n2 > n1
	})
	shot := filepath.Join(t.TempDir(), "status.png")
	if os.Getenv("SLUICE_UPDATE_SCREENSHOT") != "" {
		shot = "../docs/status.png"
	}
	chromium(t, url, "--virtual-time-budget=3000", "--window-size=1400,1250", "--hide-scrollbars", "--screenshot="+shot)
	png, err := os.ReadFile(shot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) || len(png) < 10_000 {
		t.Fatalf("screenshot %s: %d bytes, %v", shot, len(png), err)
	}
}

// brokenCells loads the status page at httpAddr in a 1400 px frame, on one
// origin with a checker page, and returns (JSON) the text of every cell
// that is not meant to wrap (class w) and spans more than one line.
func brokenCells(t *testing.T, httpAddr string) string {
	t.Helper()
	target, _ := url.Parse("http://" + httpAddr)
	proxy := httputil.NewSingleHostReverseProxy(target)
	mux := http.NewServeMux()
	mux.Handle("/", proxy)
	mux.HandleFunc("/check", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `<!doctype html><html><body data-broken="pending">
<iframe id="f" src="/" style="width:1400px;height:1250px;border:0"></iframe>
<script>
setTimeout(() => {
  const doc = document.getElementById("f").contentDocument, out = [];
  for (const td of doc.querySelectorAll("td")) {
    if (td.classList.contains("w") || td.classList.contains("empty") || td.textContent === "") continue;
    const lh = parseFloat(doc.defaultView.getComputedStyle(td).lineHeight) || 20;
    const r = doc.createRange(); r.selectNodeContents(td);
    if (r.getBoundingClientRect().height > lh * 1.5) out.push(td.textContent);
  }
  document.body.dataset.broken = JSON.stringify(out);
}, 2500);
</script></body></html>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dom, _ := chromium(t, srv.URL+"/check", "--virtual-time-budget=4000", "--window-size=1440,1300", "--dump-dom")
	m := regexp.MustCompile(`data-broken="([^"]*)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the checker did not run:\n%.2000s", dom)
	}
	return html.UnescapeString(m[1])
}

// getStatus reads /status.json from addr.
func getStatus(t *testing.T, addr string) map[string]any {
	t.Helper()
	r, err := http.Get("http://" + addr + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("/status.json: %d %s", r.StatusCode, r.Header.Get("Content-Type"))
	}
	var st map[string]any
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// What the status page shows, read from /status.json: decisions and
// refusals counted, the most-refused keys, loaded rules with their file and
// line, overrides and scale factors; on a cluster every member with its
// role and health, and a killed member offline.
func TestStatusJSON(t *testing.T) {
	httpAddr := freeAddr(t)
	s := StartServer(t, "--http-addr", httpAddr, "--rules", "../examples/rules")
	c := s.Client()
	c.Do(ctx(t), "RL.OVERRIDE", "SET", "messaging", 20, "day", "DESCRIPTOR", "to_number", "2061111111")
	c.Do(ctx(t), "RL.SCALE", "SET", "messaging", "0.5")
	for range 5 {
		c.Do(ctx(t), "CL.THROTTLE", "user:7", 1, 1, 60)
	}
	st := getStatus(t, httpAddr)
	if st["role"] != "single node" {
		t.Errorf("role %v", st["role"])
	}
	if a, l := st["allowed_total"].(float64), st["limited_total"].(float64); a != 2 || l != 3 {
		t.Errorf("allowed %v limited %v after 2 allowed and 3 refused", a, l)
	}
	body, _ := json.Marshal(st)
	for _, want := range []string{`{"key":"user:7","refusals":3}`, `examples/rules/messaging.yaml:`, `"descriptor":"to_number=2061111111"`, `"factor":"0.500000"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/status.json has no %s:\n%s", want, body)
		}
	}

	httpAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cl := StartCluster(t, 3, func(i int, _ []string) []string { return []string{"--http-addr", httpAddrs[i]} })
	leader := cl.Leader()
	li := indexOf(cl, leader)
	members := func() map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, m := range getStatus(t, httpAddrs[li])["members"].([]any) {
			m := m.(map[string]any)
			out[m["id"].(string)] = m
		}
		return out
	}
	eventually(t, "three online members on the leader's status", func() bool {
		ms := members()
		online := 0
		for _, m := range ms {
			if m["online"] == true {
				online++
			}
		}
		return len(ms) == 3 && online == 3
	})
	follower := cl.Followers(leader)[0]
	fi := indexOf(cl, follower)
	if st := getStatus(t, httpAddrs[fi]); st["role"] != "follower" || st["leader"] == "" ||
		!strings.Contains(fmt.Sprint(st["decisions_counted_at"]), "on the leader, n"+strconv.Itoa(li+1)) {
		t.Errorf("a follower's status: role %v leader %v, decisions counted %v", st["role"], st["leader"], st["decisions_counted_at"])
	}
	follower.Kill()
	eventually(t, "the killed follower offline on the leader's status", func() bool {
		for _, m := range members() {
			if m["online"] == false {
				return true
			}
		}
		return false
	})
}

// With --requirepass the page and its data need the password (HTTP Basic,
// any user, or Bearer); /healthz and /readyz stay open and say nothing more.
func TestStatusPagePassword(t *testing.T) {
	guarded := freeAddr(t)
	StartServer(t, "--http-addr", guarded, "--requirepass", "s3cret")
	get := func(path, user, pass string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+guarded+path, nil)
		if pass != "" {
			req.SetBasicAuth(user, pass)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(r.Body)
		return r.StatusCode, b.String()
	}
	for _, path := range []string{"/", "/status.json"} {
		if code, _ := get(path, "", ""); code != http.StatusUnauthorized {
			t.Errorf("%s without the password: %d", path, code)
		}
		if code, _ := get(path, "admin", "wrong"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong password: %d", path, code)
		}
		if code, _ := get(path, "admin", "s3cret"); code != http.StatusOK {
			t.Errorf("%s with the password: %d", path, code)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+guarded+path, nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusOK {
			t.Errorf("%s with the password as a bearer token: %v %v", path, r, err)
		} else {
			r.Body.Close()
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(path, "", ""); code != http.StatusOK || len(body) > 10 {
			t.Errorf("%s: %d %q", path, code, body)
		}
	}
}
