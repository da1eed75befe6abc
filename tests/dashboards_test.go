package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/sluice-rl/sluice/httplimit"
)

// promQuery evaluates expr now through Prometheus' HTTP API and returns
// how many series it gave, or the API's error.
func promQuery(t *testing.T, promAddr, expr string) (int, error) {
	t.Helper()
	r, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return 0, err
	}
	defer r.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("%s", body.Error)
	}
	return len(body.Data.Result), nil
}

// firing lists the alerts Prometheus has firing.
func firing(t *testing.T, promAddr string) map[string]bool {
	out := map[string]bool{}
	for name, state := range alertStates(t, promAddr) {
		if strings.Contains(state, "firing") {
			out[name] = true
		}
	}
	return out
}

// alertStates is every active alert's state (pending, firing), with the
// labels that say whose it is, by alert name.
func alertStates(t *testing.T, promAddr string) map[string]string {
	r, err := http.Get("http://" + promAddr + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var body struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range body.Data.Alerts {
		name := a.Labels["alertname"]
		out[name] += fmt.Sprintf("%s %v; ", a.State, a.Labels)
	}
	return out
}

// dashboardExprs are every panel target's expression of the dashboard, its
// variables given values that select everything.
func dashboardExprs(t *testing.T) []string {
	src, err := os.ReadFile("../deploy/grafana/sluice.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Templating struct {
			List []struct {
				Name, Type string
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type       string `json:"type"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(src, &d); err != nil {
		t.Fatalf("deploy/grafana/sluice.json: %v", err)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["instance"] != "query" || vars["domain"] != "query" {
		t.Fatalf("the dashboard's variables: %v (want datasource, instance and domain)", vars)
	}
	repl := strings.NewReplacer("$instance", ".*", "$domain", ".*", "$__rate_interval", "15s")
	var out []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("a panel whose data source is %q, not the ${datasource} variable", p.Datasource.UID)
		}
		for _, tg := range p.Targets {
			out = append(out, repl.Replace(tg.Expr))
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\b((?:sluice|process|go)_[a-z_]+|up)\b`)

// The Grafana dashboard and the alerting rules against a real Prometheus
// scraping a real sluice, a 3-node cluster and an application running
// httplimit, under traffic: every panel's expressions return series, every
// alert's metrics exist, and the alerts a test can provoke (the quota
// store's disk full, a cluster without a leader, a node down, an open
// breaker) fire. Run by scripts/check_dashboards.sh (make
// check-dashboards), which needs Debian's prometheus package.
func TestDashboardsAndAlerts(t *testing.T) {
	if os.Getenv("SLUICE_CHECK_DASHBOARDS") == "" {
		t.Skip("SLUICE_CHECK_DASHBOARDS is not set (scripts/check_dashboards.sh sets it)")
	}
	if out, err := exec.Command("promtool", "check", "rules", "../deploy/prometheus/alerts.yml").CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	exprs := dashboardExprs(t)

	// The single node keeps its data on a small disk the test fills.
	rules := writeRules(t, "api.yaml", apiRules)
	disk := smallDisk(t)
	singleHTTP, singleGRPC := freeAddr(t), freeAddr(t)
	single := &Server{t: t, DataDir: filepath.Join(disk, "data")}
	single.Args = []string{"--enable-debug-command", "--data-dir", single.DataDir, "--rules", rules,
		"--http-addr", singleHTTP, "--grpc-addr", singleGRPC, "--quota-fsync", "always"}
	single.Start()
	t.Cleanup(single.Kill)
	clusterHTTP := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	clusterGRPC := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cl := StartCluster(t, 3, func(i int, _ []string) []string {
		return []string{"--http-addr", clusterHTTP[i], "--grpc-addr", clusterGRPC[i]}
	}, "--rules", rules)
	leader := cl.Leader()
	// A sharded cluster of two one-member groups: its group without a
	// leader pages.
	shardHTTP := []string{freeAddr(t), freeAddr(t)}
	sharded := StartShardedClusterWith(t, 1, [][]string{{"0-8191"}, {"8192-16383"}},
		func(g, _ int) []string { return []string{"--http-addr", shardHTTP[g]} }, "--rules", rules)

	// An application whose httplimit talks to a sluice that is not there:
	// its breaker opens, it fails open.
	reg := prometheus.NewRegistry()
	dead := freeAddr(t)
	mw, err := httplimit.New(httplimit.Config{
		Client: redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1}), Key: keyByUser,
		Limit: httplimit.FixedWindow{Limit: 5, Window: time.Minute}, Metrics: reg, Timeout: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	app := http.Server{Handler: http.NewServeMux()}
	appAddr := freeAddr(t)
	mux := app.Handler.(*http.ServeMux)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })))
	ln, err := net.Listen("tcp", appAddr)
	if err != nil {
		t.Fatal(err)
	}
	go app.Serve(ln)
	t.Cleanup(func() { app.Close() })

	// Prometheus, scraping every second, evaluating every second, with the
	// alerts' hold times shortened so a test can see them fire.
	dir := t.TempDir()
	alerts, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	alerts = regexp.MustCompile(`(?m)^(\s+)for: \S+`).ReplaceAll(alerts, []byte("${1}for: 2s"))
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), alerts, 0o644); err != nil {
		t.Fatal(err)
	}
	quoted := func(addrs ...string) string { return `["` + strings.Join(addrs, `", "`) + `"]` }
	config := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [alerts.yml]
scrape_configs:
  - job_name: sluice-single
    static_configs: [{targets: %s}]
  - job_name: sluice-cluster
    static_configs: [{targets: %s}]
  - job_name: sluice-sharded
    static_configs: [{targets: %s}]
  - job_name: app
    static_configs: [{targets: %s}]
`, quoted(singleHTTP), quoted(clusterHTTP...), quoted(shardHTTP...), quoted(appAddr))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	prom := exec.Command("prometheus", "--config.file", filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path", filepath.Join(dir, "data"), "--web.listen-address", promAddr, "--log.level", "warn")
	promLog := &logBuffer{}
	prom.Stdout, prom.Stderr = promLog, promLog
	if err := prom.Start(); err != nil {
		t.Fatalf("prometheus: %v", err)
	}
	t.Cleanup(func() { prom.Process.Kill(); prom.Wait() })
	eventually(t, "Prometheus scraping every target", func() bool {
		n, err := promQuery(t, promAddr, `up == 1`)
		return err == nil && n == 7
	})

	// A healthy cluster and node under load raise no alert: for healthyFor,
	// ten times every alert's (shortened) hold, nothing is even pending —
	// no member reports a live sibling dead, no election happens.
	const healthyFor = 20 * time.Second
	stopLoad := make(chan struct{})
	var loadDone sync.WaitGroup
	for _, s := range []*Server{single, leader, leader} {
		loadDone.Go(func() {
			c := s.Client(func(o *redis.Options) { o.MaxRetries = -1 })
			defer c.Close()
			for i := 0; ; i++ {
				select {
				case <-stopLoad:
					return
				default:
				}
				c.Do(context.Background(), "CL.THROTTLE", fmt.Sprintf("load%d", i%100), 100, 100, 1)
			}
		})
	}
	healthyUntil := time.Now().Add(healthyFor)
	for time.Now().Before(healthyUntil) {
		if states := alertStates(t, promAddr); len(states) > 0 {
			close(stopLoad)
			loadDone.Wait()
			var terms []string
			for _, n := range cl.Nodes {
				info, _ := n.Client().Do(ctx(t), "RAFT", "INFO").Slice()
				terms = append(terms, fmt.Sprint(info[:16]))
			}
			t.Fatalf("a healthy cluster under load raised alerts: %v\nRAFT INFO: %v\n%s", states, terms, cl.Logs())
		}
		time.Sleep(500 * time.Millisecond)
	}
	close(stopLoad)
	loadDone.Wait()

	// Traffic of every kind the panels show.
	sc := single.Client()
	lc := leader.Client()
	for _, c := range []*redis.Client{sc, lc} {
		for i := range 20 {
			c.Do(ctx(t), "CL.THROTTLE", fmt.Sprintf("hot%d", i%3), 1, 1, 60)
			c.Do(ctx(t), "RL.CHECK", "api", "DESCRIPTOR", "endpoint", "/x")
			c.Do(ctx(t), "RL.CHECK", "api", "DESCRIPTOR", "canary", "c")
			c.Do(ctx(t), "QUOTA.CHECK", "q", 5, "DAY")
		}
	}
	for _, addr := range []string{singleGRPC, clusterGRPC[indexOf(cl, cl.Followers(leader)[0])]} {
		rc, _ := rlsClient(t, addr)
		for range 5 {
			rc.ShouldRateLimit(ctx(t), rlsRequest("api", 1, "endpoint=/y"))
		}
	}
	for range 10 {
		req, _ := http.NewRequest(http.MethodGet, "http://"+appAddr+"/", nil)
		req.Header.Set("X-User", "u")
		if r, err := http.DefaultClient.Do(req); err == nil {
			r.Body.Close()
		}
	}

	// Every panel's expression returns series (rates need two scrapes).
	for _, e := range exprs {
		var n int
		var qerr error
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if n, qerr = promQuery(t, promAddr, e); qerr == nil && n > 0 {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if qerr != nil || n == 0 {
			t.Errorf("panel expression returns nothing (%v): %s", qerr, e)
		}
	}
	// Every metric an alert's expression names exists.
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(alerts, &file); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			for _, m := range metricName.FindAllString(r.Expr, -1) {
				names[m] = true
			}
		}
	}
	for name := range names {
		if n, err := promQuery(t, promAddr, fmt.Sprintf(`count({__name__=%q})`, name)); err != nil || n == 0 {
			t.Errorf("an alert names %s, which no target exports (%v)", name, err)
		}
	}

	// Provoke what the alerts watch. Pebble preallocates its log on the
	// first write after a start, and a full disk then still has room in it:
	// restart the single node, so the disk fills up before that write.
	single.Stop()
	single.Start()
	sc = single.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	fillDisk(t, disk)
	eventually(t, "a quota write refused on the full disk", func() bool {
		return sc.Do(ctx(t), "QUOTA.CHECK", fmt.Sprintf("full%d", time.Now().UnixNano()), 5, "DAY").Err() != nil
	})
	// One member down pages (the leader reports it; Prometheus cannot
	// scrape it); no leader is lost, so SluiceNoLeader stays quiet.
	followers := cl.Followers(leader)
	followers[0].Kill()
	eventually(t, "SluiceNodeDown after one member died", func() bool { return firing(t, promAddr)["SluiceNodeDown"] })
	if got := firing(t, promAddr); got["SluiceNoLeader"] {
		t.Fatalf("SluiceNoLeader fires with two of three members up: %v", got)
	}
	// The majority gone: no leader. The sharded cluster's second group
	// gone: its first pages it.
	followers[1].Kill()
	sharded.Groups[1][0].Kill()
	want := []string{"SluiceQuotaStoreFailing", "SluiceNoLeader", "SluiceNodeDown", "SluiceHTTPLimitBreakerOpen", "SluiceGroupNoLeader"}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := firing(t, promAddr)
		missing := []string{}
		for _, a := range want {
			if !got[a] {
				missing = append(missing, a)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alerts not firing: %v (firing: %v)\nprometheus:\n%s", missing, got, promLog.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}
