//go:build deploy

package tests

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"
)

const chartDir = "../deploy/helm/sluice"

// manifest is one object helm rendered, as generic YAML.
type manifest map[string]any

func (m manifest) kind() string { s, _ := m["kind"].(string); return s }
func (m manifest) name() string { return str(dig(m, "metadata", "name")) }

// dig walks maps by key and lists by index ("0").
func dig(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case manifest:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// helm runs the helm built by scripts/check_deploy.sh (on PATH there).
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	path, err := exec.LookPath("helm")
	if err != nil {
		t.Fatal("helm is not on PATH: run make check-deploy, which builds it from its module")
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

// render is helm template of the chart with values (helm's --set form).
func render(t *testing.T, namespace string, set ...string) []manifest {
	t.Helper()
	return renderValues(t, namespace, "", set...)
}

// renderValues is render with a values file holding values (YAML) too.
func renderValues(t *testing.T, namespace, values string, set ...string) []manifest {
	t.Helper()
	args := []string{"template", "r", chartDir, "--namespace", namespace}
	if values != "" {
		path := filepath.Join(t.TempDir(), "values.yaml")
		writeFile(t, path, values)
		args = append(args, "--values", path)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", set, err, out)
	}
	var objs []manifest
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		// Into a plain map: yaml gives nested maps the type decoded into.
		var m map[string]any
		err := dec.Decode(&m)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("helm template %v: %v", set, err)
		}
		if m != nil {
			objs = append(objs, manifest(m))
		}
	}
	return objs
}

func ofKind(objs []manifest, kind string) []manifest {
	var out []manifest
	for _, o := range objs {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name() < out[j].name() })
	return out
}

func byName(objs []manifest, kind, name string) manifest {
	for _, o := range ofKind(objs, kind) {
		if o.name() == name {
			return o
		}
	}
	return nil
}

// containerArgs are a StatefulSet's sluice container's args.
func containerArgs(sts manifest) []string {
	var args []string
	for _, a := range dig(sts, "spec", "template", "spec", "containers", "0", "args").([]any) {
		args = append(args, str(a))
	}
	return args
}

// flagValue is the value of --name=value in args ("" when absent).
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// renderedMap is the cluster map the chart's ConfigMap holds.
type renderedMap struct {
	Epoch  int
	Groups []struct {
		ID      string
		Slots   []string
		Members map[string]string
	}
}

func clusterMapOf(t *testing.T, objs []manifest) renderedMap {
	t.Helper()
	cm := ofKind(objs, "ConfigMap")
	for _, c := range cm {
		if src := str(dig(c, "data", "cluster.yaml")); src != "" {
			var m renderedMap
			if err := yaml.Unmarshal([]byte(src), &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatal("no cluster map rendered")
	return renderedMap{}
}

// The chart lints and renders each shape the README names: one node, one
// group of three, two groups of three (and the optional objects).
func TestHelmChartLintsAndRendersEachShape(t *testing.T) {
	for _, set := range [][]string{
		nil,
		{"replicas=1"},
		{"groups=2"},
		{"groups=3", "initialGroups=2"},
		{"groups=2", "serviceMonitor.enabled=true", "prometheusRule.enabled=true", "auth.existingSecret=pw", "rules.api\\.yaml=domain: api"},
	} {
		args := []string{"lint", "--strict", chartDir}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if out, err := helm(t, args...); err != nil {
			t.Fatalf("helm lint %v: %v\n%s", set, err, out)
		}
	}

	t.Run("the version", func(t *testing.T) {
		// The chart's appVersion is the image's tag by default: the
		// version make image tags, sluice's own.
		out, err := exec.Command(binary, "--version").Output()
		if err != nil {
			t.Fatal(err)
		}
		objs := render(t, "default")
		image := str(dig(ofKind(objs, "StatefulSet")[0], "spec", "template", "spec", "containers", "0", "image"))
		if want := "sluice:" + strings.TrimPrefix(strings.TrimSpace(string(out)), "sluice "); image != want {
			t.Fatalf("the chart runs %s, this sluice is %s", image, want)
		}
	})

	t.Run("one node", func(t *testing.T) {
		objs := render(t, "default", "replicas=1")
		sts := ofKind(objs, "StatefulSet")
		if len(sts) != 1 || str(dig(sts[0], "spec", "replicas")) != "1" {
			t.Fatalf("want one StatefulSet of one: %v", sts)
		}
		args := containerArgs(sts[0])
		for _, f := range []string{"cluster-map", "cluster-join", "cluster-secret-file", "raft-listen-addr"} {
			if flagValue(args, f) != "" {
				t.Errorf("one node given --%s: %q", f, args)
			}
		}
		if len(ofKind(objs, "Secret")) != 0 || len(ofKind(objs, "PodDisruptionBudget")) != 0 {
			t.Error("one node: no cluster secret, no disruption budget")
		}
	})

	t.Run("one group of three", func(t *testing.T) {
		objs := render(t, "default")
		m := clusterMapOf(t, objs)
		if len(m.Groups) != 1 || !slices.Equal(m.Groups[0].Slots, []string{"0-16383"}) || len(m.Groups[0].Members) != 3 {
			t.Fatalf("map: %+v", m)
		}
		pdb := ofKind(objs, "PodDisruptionBudget")
		if len(pdb) != 1 || str(dig(pdb[0], "spec", "maxUnavailable")) != "1" {
			t.Fatalf("want one budget keeping 2 of 3: %v", pdb)
		}
	})

	t.Run("two groups of three", func(t *testing.T) {
		objs := render(t, "sluice-ns", "groups=2")
		m := clusterMapOf(t, objs)
		sts := ofKind(objs, "StatefulSet")
		if len(sts) != 2 || len(m.Groups) != 2 {
			t.Fatalf("want 2 StatefulSets and 2 groups in the map: %d, %+v", len(sts), m)
		}
		// Every pod is a member of the map once, in its StatefulSet's
		// group, named by --node-id=$(POD_NAME).
		named := map[string]int{}
		for _, g := range m.Groups {
			for id, addr := range g.Members {
				named[id]++
				host := id + ".r-sluice-members.sluice-ns.svc.cluster.local"
				if addr != host+":6379@"+host+":16379" {
					t.Errorf("member %s at %q", id, addr)
				}
			}
		}
		for gi, s := range sts {
			args := containerArgs(s)
			if flagValue(args, "node-id") != "$(POD_NAME)" || flagValue(args, "cluster-map") == "" || flagValue(args, "cluster-secret-file") == "" ||
				flagValue(args, "raft-listen-addr") != "0.0.0.0:16379" {
				t.Fatalf("%s args %q", s.name(), args)
			}
			if str(dig(s, "spec", "podManagementPolicy")) != "Parallel" || str(dig(s, "spec", "serviceName")) != "r-sluice-members" {
				t.Errorf("%s: %v", s.name(), s["spec"])
			}
			pod := dig(s, "spec", "template", "spec")
			// A group's members kept apart by default: losing a node
			// loses one member of a group at most.
			apart := dig(pod, "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution", "0", "podAffinityTerm")
			if str(dig(apart, "topologyKey")) != "kubernetes.io/hostname" || str(dig(apart, "labelSelector", "matchLabels", "sluice.io/group")) != fmt.Sprintf("g%d", gi+1) {
				t.Errorf("%s: anti-affinity %v", s.name(), dig(pod, "affinity"))
			}
			if str(dig(pod, "automountServiceAccountToken")) != "false" || flagValue(args, "maxmemory") != "640mb" {
				t.Errorf("%s: service account token mounted, or no --maxmemory: %q", s.name(), args)
			}
			for i := range 3 {
				pod := fmt.Sprintf("%s-%d", s.name(), i)
				if named[pod] != 1 {
					t.Errorf("pod %s named %d times in the map", pod, named[pod])
				}
				delete(named, pod)
				if _, ok := m.Groups[gi].Members[pod]; !ok {
					t.Errorf("pod %s is not in group %s", pod, m.Groups[gi].ID)
				}
			}
		}
		if len(named) != 0 {
			t.Errorf("the map names members no pod is: %v", named)
		}
		if !slices.Equal(m.Groups[0].Slots, []string{"0-8191"}) || !slices.Equal(m.Groups[1].Slots, []string{"8192-16383"}) {
			t.Errorf("slots: %v %v", m.Groups[0].Slots, m.Groups[1].Slots)
		}
		members := byName(objs, "Service", "r-sluice-members")
		if str(dig(members, "spec", "clusterIP")) != "None" || str(dig(members, "spec", "publishNotReadyAddresses")) != "true" {
			t.Errorf("the members' Service: %v", members["spec"])
		}
	})

	t.Run("a group added later joins", func(t *testing.T) {
		objs := render(t, "default", "groups=3", "initialGroups=2")
		if m := clusterMapOf(t, objs); len(m.Groups) != 2 {
			t.Fatalf("the map names %d groups, want the 2 installed first", len(m.Groups))
		}
		args := containerArgs(byName(objs, "StatefulSet", "r-sluice-g3"))
		if flagValue(args, "cluster-map") != "" || flagValue(args, "cluster-join") != "r-sluice-g1-0.r-sluice-members.default.svc.cluster.local:6379" {
			t.Fatalf("g3 args %q", args)
		}
		// It serves nothing until CLUSTER ADDGROUP names it: its
		// startup probe waits a day before liveness may restart it.
		wait := func(name string) int {
			n, _ := strconv.Atoi(str(dig(byName(objs, "StatefulSet", name), "spec", "template", "spec", "containers", "0", "startupProbe", "failureThreshold")))
			return n
		}
		if wait("r-sluice-g3")*2 < 86400 || wait("r-sluice-g1")*2 > 600 {
			t.Fatalf("startup probes: g3 %d, g1 %d tries of 2 s", wait("r-sluice-g3"), wait("r-sluice-g1"))
		}
	})

	t.Run("the shipped alert rules", func(t *testing.T) {
		objs := render(t, "default", "prometheusRule.enabled=true", "serviceMonitor.enabled=true")
		rule := ofKind(objs, "PrometheusRule")
		if len(rule) != 1 || len(ofKind(objs, "ServiceMonitor")) != 1 {
			t.Fatal("want a PrometheusRule and a ServiceMonitor")
		}
		src, err := os.ReadFile("../deploy/prometheus/alerts.yml")
		if err != nil {
			t.Fatal(err)
		}
		var shipped map[string]any
		if err := yaml.Unmarshal(src, &shipped); err != nil {
			t.Fatal(err)
		}
		if d := firstDiff("groups", shipped["groups"], dig(rule[0], "spec", "groups")); d != "" {
			t.Fatalf("the PrometheusRule is not deploy/prometheus/alerts.yml (the chart's files/alerts.yml drifted): %s", d)
		}
	})

	t.Run("bad values", func(t *testing.T) {
		for _, set := range [][]string{{"initialGroups=3"}, {"replicas=0"}, {"replicas=2"}, {"replicas=4"}, {"groups=0"}, {"podAntiAffinity=sometimes"}, {"replica=5"}, {"maxmemory=lots"}, {"ports.resp=0"}} {
			args := []string{"template", "r", chartDir}
			for _, s := range set {
				args = append(args, "--set", s)
			}
			if out, err := helm(t, args...); err == nil {
				t.Errorf("%v rendered:\n%.300s", set, out)
			}
		}
	})
}

// firstDiff names the first place where got differs from want ("": the
// same).
func firstDiff(path string, want, got any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: %v, want %v", path, got, want)
		}
		for k := range w {
			if d := firstDiff(path+"."+k, w[k], g[k]); d != "" {
				return d
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: %d entries, want %d", path, len(g), len(w))
		}
		for i := range w {
			if d := firstDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); d != "" {
				return d
			}
		}
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("%s: %T %q, want %T %q", path, got, got, want, want)
		}
	}
	return ""
}

// pod is a rendered pod run as a process: its name, its loopback address
// (standing in for its pod IP and DNS name), its command and files.
type pod struct {
	name, ip string
	argv     []string
	probe    string // the readiness probe's URL
	server   *Server
}

// podsOf turns a rendering into processes as the kubelet would start the
// pods: each StatefulSet's replicas, --node-id from the pod's name, the
// ConfigMaps and Secrets they mount written as files, a data directory
// for the claim; pod DNS names and 0.0.0.0 become loopback addresses of
// their own (127.0.0.10 on), the ports stay the chart's.
func podsOf(t *testing.T, objs []manifest, namespace string) []*pod {
	t.Helper()
	var pods []*pod
	names := map[string]string{} // DNS name -> loopback address
	for _, s := range ofKind(objs, "StatefulSet") {
		n, _ := strconv.Atoi(str(dig(s, "spec", "replicas")))
		for i := range n {
			p := &pod{name: fmt.Sprintf("%s-%d", s.name(), i), ip: fmt.Sprintf("127.0.0.%d", 10+len(pods))}
			names[fmt.Sprintf("%s.%s.%s.svc.cluster.local", p.name, str(dig(s, "spec", "serviceName")), namespace)] = p.ip
			pods = append(pods, p)
		}
	}
	local := func(src, ip string) string {
		for name, addr := range names {
			src = strings.ReplaceAll(src, name, addr)
		}
		if ip == "" { // a file every pod shares
			return src
		}
		return strings.ReplaceAll(src, "0.0.0.0", ip)
	}
	volumes := t.TempDir()
	k := 0
	for _, s := range ofKind(objs, "StatefulSet") {
		spec := dig(s, "spec", "template", "spec")
		c := dig(spec, "containers", "0")
		n, _ := strconv.Atoi(str(dig(s, "spec", "replicas")))
		for range n {
			p := pods[k]
			k++
			// Volumes: where each mount's files are on this machine. A
			// ConfigMap or Secret is one directory every pod mounting it
			// shares at the same path, as each pod sees the same files
			// at the same path in Kubernetes; the claim is the pod's own.
			mounts := map[string]string{}
			for _, v := range dig(c, "volumeMounts").([]any) {
				vname, path := str(dig(v, "name")), str(dig(v, "mountPath"))
				mounts[path] = filepath.Join(t.TempDir(), vname)
				for _, vol := range dig(spec, "volumes").([]any) {
					if str(dig(vol, "name")) != vname {
						continue
					}
					if cm := str(dig(vol, "configMap", "name")); cm != "" {
						mounts[path] = shared(t, volumes, "configmap-"+cm, func(dir string) {
							for key, val := range dig(byName(objs, "ConfigMap", cm), "data").(map[string]any) {
								writeFile(t, filepath.Join(dir, key), local(str(val), ""))
							}
						})
					}
					if sec := str(dig(vol, "secret", "secretName")); sec != "" {
						mounts[path] = shared(t, volumes, "secret-"+sec, func(dir string) {
							for key, val := range dig(byName(objs, "Secret", sec), "data").(map[string]any) {
								b, err := base64.StdEncoding.DecodeString(str(val))
								if err != nil {
									t.Fatal(err)
								}
								writeFile(t, filepath.Join(dir, key), string(b))
							}
						})
					}
				}
				if err := os.MkdirAll(mounts[path], 0o755); err != nil {
					t.Fatal(err)
				}
			}
			env := map[string]string{}
			for _, e := range dig(c, "env").([]any) {
				switch field := str(dig(e, "valueFrom", "fieldRef", "fieldPath")); field {
				case "metadata.name":
					env[str(dig(e, "name"))] = p.name
				case "":
					env[str(dig(e, "name"))] = str(dig(e, "value"))
				default:
					t.Fatalf("env from %s: not modelled", field)
				}
			}
			p.argv = []string{"sluice"}
			for _, a := range containerArgs(s) {
				for name, val := range env {
					a = strings.ReplaceAll(a, "$("+name+")", val)
				}
				for path, dir := range mounts {
					a = strings.ReplaceAll(a, "="+path, "="+dir)
				}
				p.argv = append(p.argv, local(a, p.ip))
			}
			probe := dig(c, "readinessProbe", "httpGet")
			port := ""
			for _, cp := range dig(c, "ports").([]any) {
				if str(dig(cp, "name")) == str(dig(probe, "port")) {
					port = str(dig(cp, "containerPort"))
				}
			}
			p.probe = "http://" + p.ip + ":" + port + str(dig(probe, "path"))
		}
	}
	return pods
}

// shared is the directory under root named name, filled by fill the first
// time it is asked for.
func shared(t *testing.T, root, name string, fill func(dir string)) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fill(dir)
	return dir
}

// startPods starts each pod's process (sluice built without -race: six
// and more at once).
func startPods(t *testing.T, pods []*pod) {
	t.Helper()
	bin, err := plainBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		p.argv[0] = bin
		p.server = &Server{t: t, Addr: p.ip + ":6379", Argv: p.argv}
		p.server.Start()
		t.Cleanup(p.server.Kill)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func ready(url string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// The chart's two groups of three, started exactly as the rendered pods
// would be (their args, env and mounted files; pod DNS names mapped to
// loopback addresses): the cluster forms, every pod turns ready, redis-cli
// --cluster check is clean, rules from the ConfigMap decide, and a
// group's leader killed fails over.
func TestHelmPodsFormTheCluster(t *testing.T) {
	const ns = "limits"
	objs := renderValues(t, ns, `
groups: 2
rules:
  api.yaml: |
    domain: api
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 2}
`)
	pods := podsOf(t, objs, ns)
	if len(pods) != 6 {
		t.Fatalf("%d pods rendered, want 6", len(pods))
	}
	startPods(t, pods)
	for _, p := range pods {
		eventuallyWithin(t, 30*time.Second, p.name+" ready ("+p.probe+")", func() bool { return ready(p.probe) }, func() string { return p.server.Logs() })
	}
	// Right after the start a group may still change its first leader,
	// and the others learn it at their next look: the check is clean
	// once they agree.
	var check []byte
	eventuallyWithin(t, 20*time.Second, "redis-cli --cluster check clean", func() bool {
		out, err := exec.Command("redis-cli", "--cluster", "check", pods[0].server.Addr).CombinedOutput()
		check = out
		return err == nil && strings.Contains(string(out), "[OK] All 16384 slots covered") &&
			!strings.Contains(string(out), "[ERR]") && !strings.Contains(string(out), "[WARNING]")
	}, func() string { return string(check) })

	// The rules the ConfigMap holds decide (the domain's slot is in one
	// of the groups; the cluster client follows it there) once the
	// groups' leaders have logged them.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{pods[3].server.Addr}})
	defer cc.Close()
	eventually(t, "the ConfigMap's rule in force in both groups", func() bool {
		v, err := cc.Do(ctx(t), "RL.CHECK", "api", "COST", 0, "DESCRIPTOR", "user", "u1").Slice()
		return err == nil && v[1] == int64(2)
	})
	for i, want := range []int64{0, 0, 1} {
		v, err := cc.Do(ctx(t), "RL.CHECK", "api", "DESCRIPTOR", "user", "u1").Slice()
		if err != nil || v[0] != want {
			t.Fatalf("check %d: %v %v, want limited=%d", i, v, err, want)
		}
	}

	// g1's leader dies; another g1 member leads and serves g1's slots.
	var leader *pod
	g1 := pods[:3]
	eventually(t, "a g1 leader", func() bool {
		for _, p := range g1 {
			if role(t, p.server) == "master" {
				leader = p
				return true
			}
		}
		return false
	})
	leader.server.Kill()
	var next *pod
	eventuallyWithin(t, 20*time.Second, "a new g1 leader", func() bool {
		for _, p := range g1 {
			if p != leader && role(t, p.server) == "master" {
				next = p
				return true
			}
		}
		return false
	}, nil)
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		if slot, _ := next.server.Client().ClusterKeySlot(ctx(t), k).Result(); slot < 8192 {
			key = k
		}
	}
	eventually(t, "g1's slots served after the failover", func() bool {
		return next.server.Client().Do(ctx(t), "CL.THROTTLE", key, "5", "10", "60").Err() == nil
	})
	for _, p := range g1 {
		if p != leader {
			eventually(t, p.name+" ready again", func() bool { return ready(p.probe) })
		}
	}
}

// deploy/envoy/compose.yaml runs the members exactly as the chart's pods
// run for one group of three: the same args (the hosts' names for the
// pods'), the same files at the same paths (the map the chart renders,
// named so), the image make image tags.
func TestComposeRunsTheChartsCommands(t *testing.T) {
	objs := renderValues(t, "default", "rules:\n  edge.yaml: \"domain: edge\"\n")
	sts := ofKind(objs, "StatefulSet")
	if len(sts) != 1 {
		t.Fatalf("%d StatefulSets", len(sts))
	}
	src, err := os.ReadFile("../deploy/envoy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image   string
			Command []string
			Volumes []string
		}
	}
	if err := yaml.Unmarshal(src, &compose); err != nil {
		t.Fatal(err)
	}
	// One name for a member in both: its pod's (and DNS) name in the
	// chart, its host's in compose.
	chartNames := func(s string) string {
		for i := range 3 {
			pod := fmt.Sprintf("r-sluice-g1-%d", i)
			s = strings.ReplaceAll(s, pod+".r-sluice-members.default.svc.cluster.local", fmt.Sprintf("member%d", i))
			s = strings.ReplaceAll(s, pod, fmt.Sprintf("member%d", i))
		}
		return s
	}
	composeNames := func(s string) string {
		for i := range 3 {
			s = strings.ReplaceAll(s, fmt.Sprintf("sluice-%d", i+1), fmt.Sprintf("member%d", i))
		}
		return s
	}
	image := str(dig(sts[0], "spec", "template", "spec", "containers", "0", "image"))
	for i := range 3 {
		svc, ok := compose.Services[fmt.Sprintf("sluice-%d", i+1)]
		if !ok {
			t.Fatalf("compose has no sluice-%d", i+1)
		}
		var want, got []string
		for _, a := range containerArgs(sts[0]) {
			want = append(want, chartNames(strings.ReplaceAll(a, "$(POD_NAME)", fmt.Sprintf("r-sluice-g1-%d", i))))
		}
		for _, a := range svc.Command {
			got = append(got, composeNames(a))
		}
		if !slices.Equal(got, want) {
			t.Errorf("sluice-%d runs\n  %q\nthe chart's pod runs\n  %q", i+1, got, want)
		}
		if svc.Image != image {
			t.Errorf("sluice-%d image %q, the chart's %q", i+1, svc.Image, image)
		}
		// Every path an argument names is mounted there.
		for _, a := range svc.Command {
			_, path, _ := strings.Cut(a, "=")
			if !strings.HasPrefix(path, "/") {
				continue
			}
			found := false
			for _, v := range svc.Volumes {
				if parts := strings.Split(v, ":"); len(parts) >= 2 && parts[1] == path {
					found = true
				}
			}
			if !found {
				t.Errorf("sluice-%d: %s is not mounted", i+1, path)
			}
		}
	}
	var composeMap renderedMap
	mapSrc, err := os.ReadFile("../deploy/envoy/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(composeNames(string(mapSrc))), &composeMap); err != nil {
		t.Fatal(err)
	}
	chartMap := clusterMapOf(t, objs)
	for gi, g := range chartMap.Groups {
		named := map[string]string{}
		for id, addr := range g.Members {
			named[chartNames(id)] = chartNames(addr)
		}
		chartMap.Groups[gi].Members = named
	}
	if !reflect.DeepEqual(composeMap, chartMap) {
		t.Errorf("compose's cluster map %+v, the chart's %+v", composeMap, chartMap)
	}
}

// Adding a group as the README says: helm upgrade to groups=3 with
// initialGroups=2 changes nothing of the running groups (their
// StatefulSets and the map render the same) and adds g3, whose pods start
// with --cluster-join; CLUSTER ADDGROUP names them, and slots moved to
// them are served there.
func TestHelmUpgradeAddsAGroup(t *testing.T) {
	const ns = "limits"
	installed := render(t, ns, "groups=2")
	upgraded := render(t, ns, "groups=3", "initialGroups=2")
	for _, name := range []string{"r-sluice-g1", "r-sluice-g2"} {
		if d := firstDiff(name, map[string]any(byName(installed, "StatefulSet", name)), map[string]any(byName(upgraded, "StatefulSet", name))); d != "" {
			t.Fatalf("the upgrade changes a running group's StatefulSet (its pods would restart): %s", d)
		}
	}
	if d := firstDiff("map", map[string]any(byName(installed, "ConfigMap", "r-sluice-map")), map[string]any(byName(upgraded, "ConfigMap", "r-sluice-map"))); d != "" {
		t.Fatalf("the upgrade changes the cluster map: %s", d)
	}
	// helm keeps the Secret it made at install (lookup); helm template
	// makes a new one each time.
	for i, o := range upgraded {
		if o.kind() == "Secret" {
			upgraded[i] = byName(installed, "Secret", o.name())
		}
	}
	pods := podsOf(t, upgraded, ns)
	if len(pods) != 9 {
		t.Fatalf("%d pods, want 9", len(pods))
	}
	startPods(t, pods[:6])
	for _, p := range pods[:6] {
		eventuallyWithin(t, 30*time.Second, p.name+" ready", func() bool { return ready(p.probe) }, func() string { return p.server.Logs() })
	}
	// CLUSTER ADDGROUP with the members' names, as the README writes it
	// (here their loopback addresses), to g1's leader.
	g3 := pods[6:]
	args := []any{"CLUSTER", "ADDGROUP", "g3"}
	for _, p := range g3 {
		args = append(args, p.name, p.ip+":6379", p.ip+":16379")
	}
	leaderOf := func(group []*pod) *pod {
		var l *pod
		eventually(t, "a leader of "+group[0].name+"'s group", func() bool {
			for _, p := range group {
				if p.server != nil && role(t, p.server) == "master" {
					l = p
					return true
				}
			}
			return false
		})
		return l
	}
	eventually(t, "ADDGROUP in every group", func() bool {
		return leaderOf(pods[:3]).server.Client().Do(ctx(t), args...).Err() == nil
	})
	startPods(t, g3)
	for _, p := range g3 {
		eventuallyWithin(t, 30*time.Second, p.name+" ready", func() bool { return ready(p.probe) }, func() string { return p.server.Logs() })
	}
	node3, err := g3[0].server.Client().Do(ctx(t), "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	g2 := leaderOf(pods[3:6])
	eventually(t, "MIGRATESLOTS to g3", func() bool {
		return g2.server.Client().Do(ctx(t), "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 8192, 8292, "NODE", node3).Err() == nil
	})
	migrationEnded(t, func() *redis.Client { return leaderOf(pods[3:6]).server.Client() })
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		if slot, _ := g3[0].server.Client().ClusterKeySlot(ctx(t), k).Result(); slot >= 8192 && slot <= 8292 {
			key = k
		}
	}
	l3 := leaderOf(g3)
	if err := l3.server.Client().Do(ctx(t), "CL.THROTTLE", key, "5", "10", "60").Err(); err != nil {
		t.Fatalf("g3's leader on a key of the slots it took: %v", err)
	}
	var check []byte
	eventuallyWithin(t, 20*time.Second, "redis-cli --cluster check clean with g3", func() bool {
		out, err := exec.Command("redis-cli", "--cluster", "check", pods[0].server.Addr).CombinedOutput()
		check = out
		return err == nil && strings.Contains(string(out), "[OK] All 16384 slots covered") &&
			strings.Contains(string(out), l3.ip+":6379") &&
			!strings.Contains(string(out), "[ERR]") && !strings.Contains(string(out), "[WARNING]")
	}, func() string { return string(check) })
}
