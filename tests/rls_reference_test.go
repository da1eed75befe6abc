package tests

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The rules both services load for the differential test: nesting,
// wildcards, unlimited, shadow mode, replaces, per-second to per-day.
const referenceRules = `domain: diff
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 7}
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: day
    rate_limit: {unit: day, requests_per_unit: 4}
  - key: path
    value: files/*
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: client
    value: web
    descriptors:
      - key: path
        rate_limit: {unit: minute, requests_per_unit: 6}
      - key: path
        value: /admin
        rate_limit: {name: admin, unit: hour, requests_per_unit: 2}
  - key: free
    rate_limit: {unlimited: true}
  - key: canary
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: base
    rate_limit: {name: base, unit: minute, requests_per_unit: 1}
  - key: better
    rate_limit: {name: better, unit: minute, requests_per_unit: 9, replaces: [{name: base}]}
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: big
    rate_limit: {unit: hour, requests_per_unit: 1000}
`

// startReference runs envoyproxy/ratelimit (the binary at path) over a
// redis-server of its own, with the rules in referenceRules; it returns
// its gRPC address.
func startReference(t *testing.T, path string) string {
	t.Helper()
	redisAddr := freeAddr(t)
	_, redisPort, _ := strings.Cut(redisAddr, ":")
	rs := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", redisPort, "--save", "", "--appendonly", "no")
	if err := rs.Start(); err != nil {
		t.Skipf("redis-server: %v", err)
	}
	t.Cleanup(func() { rs.Process.Kill(); rs.Wait() })
	rc := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rc.Close()
	eventually(t, "redis-server up", func() bool { return rc.Ping(ctx(t)).Err() == nil })

	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "diff.yaml"), []byte(referenceRules), 0o644); err != nil {
		t.Fatal(err)
	}
	grpcAddr := freeAddr(t)
	_, grpcPort, _ := strings.Cut(grpcAddr, ":")
	_, httpPort, _ := strings.Cut(freeAddr(t), ":")
	_, debugPort, _ := strings.Cut(freeAddr(t), ":")
	ref := exec.Command(path)
	ref.Env = append(os.Environ(), "RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr, "USE_STATSD=false", "LOG_LEVEL=warn",
		"HOST=127.0.0.1", "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
		"GRPC_PORT="+grpcPort, "PORT="+httpPort, "DEBUG_PORT="+debugPort)
	logs := &logBuffer{}
	ref.Stdout, ref.Stderr = logs, logs
	if err := ref.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Process.Kill(); ref.Wait() })
	c, _ := rlsClient(t, grpcAddr)
	eventually(t, "envoyproxy/ratelimit serving", func() bool {
		_, err := c.ShouldRateLimit(ctx(t), rlsRequest("diff", 1, "free=x"))
		return err == nil
	})
	return grpcAddr
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.WriteString(string(p))
	return len(p), nil
}

// Random request sequences against envoyproxy/ratelimit and sluice in
// step: every field agrees for single-descriptor requests and for
// multi-descriptor requests in which no descriptor is over its limit. The
// sequence keeps the two histories identical: it sends multi-descriptor
// requests only on descriptors far from their limits, and after a
// descriptor was refused only requests at least as large (a refused
// request charges sluice nothing and envoyproxy/ratelimit its hits).
//
// It needs the reference binary (SLUICE_RLS_REFERENCE) and redis-server;
// scripts/check_rls_reference.sh builds one and runs it.
func TestRLSDifferential(t *testing.T) {
	path := os.Getenv("SLUICE_RLS_REFERENCE")
	if path == "" {
		t.Skip("SLUICE_RLS_REFERENCE is not set (scripts/check_rls_reference.sh sets it)")
	}
	refAddr := startReference(t, path)
	grpcAddr := freeAddr(t)
	StartServer(t, "--rules", writeRules(t, "diff.yaml", referenceRules), "--grpc-addr", grpcAddr)
	ref, _ := rlsClient(t, refAddr)
	sl, _ := rlsClient(t, grpcAddr)

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_RLS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (SLUICE_RLS_SEED)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	// One-descriptor requests: every kind of rule, a few values each.
	single := []func(int) string{
		func(v int) string { return fmt.Sprintf("user=u%d", v) },
		func(v int) string { return fmt.Sprintf("ip=10.0.0.%d", v) },
		func(v int) string { return fmt.Sprintf("day=d%d", v) },
		func(v int) string { return fmt.Sprintf("path=files/f%d", v) },
		func(v int) string { return fmt.Sprintf("client=web,path=/p%d", v) },
		func(int) string { return "client=web,path=/admin" },
		func(v int) string { return fmt.Sprintf("client=web,path=/x,deeper=%d", v) },
		func(v int) string { return fmt.Sprintf("free=%d", v) },
		func(v int) string { return fmt.Sprintf("canary=c%d", v) },
		func(v int) string { return fmt.Sprintf("zero=%d", v) },
		func(v int) string { return fmt.Sprintf("nomatch=%d", v) },
		func(v int) string { return fmt.Sprintf("better=b%d", v) },
	}
	units := []typev3.RateLimitUnit{typev3.RateLimitUnit_MINUTE, typev3.RateLimitUnit_HOUR, typev3.RateLimitUnit_DAY}
	// least[key] is the least hits a later request of key may carry: once
	// a key reported nothing remaining with h hits, the two services may
	// hold different counts (a refusal charges sluice nothing), which
	// only requests of at least h hits cannot tell apart.
	least := map[string]uint64{}
	compared, over := 0, 0
	for step := range 1000 {
		// A window boundary inside a step would reset one side's counter
		// and not the other's: steps stay clear of the minute's end.
		if s := time.Now().Second(); s >= 58 {
			time.Sleep(time.Duration(61-s) * time.Second)
		}
		var req *pb.RateLimitRequest
		var keys []string
		switch rng.IntN(6) {
		case 0: // several descriptors, all far from their limits
			var descs []string
			for j := range 2 + rng.IntN(3) {
				descs = append(descs, fmt.Sprintf("big=s%d-%d", step, j))
			}
			if rng.IntN(2) == 0 {
				descs = append(descs, "free=1", "nomatch=2")
			}
			if rng.IntN(3) == 0 {
				descs = append(descs, "base=1", fmt.Sprintf("better=s%d", step))
			}
			req = rlsRequest("diff", uint32(rng.IntN(3)), descs...)
		case 1: // a descriptor's own limit (one per key), on keys no rule counts
			// The unit is in the value: the reference keys a counter by the
			// value and its window's start, so one value under two units
			// shares a counter where the windows start together (hour 0
			// of a day), where sluice keeps one for each.
			v, u := rng.IntN(3), rng.IntN(3)
			req = rlsRequest("diff", 1, fmt.Sprintf("own=o%d-%d", v, u))
			o := &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(1 + v), Unit: units[u]}
			req.Descriptors[0].Limit = o
			keys = []string{fmt.Sprint(req.Descriptors[0].Entries[0].Value, o.Unit)}
		default: // one descriptor of any rule
			d := single[rng.IntN(len(single))](rng.IntN(3))
			req = rlsRequest("diff", uint32(rng.IntN(3)), d)
			keys = []string{d}
		}
		// Per-descriptor hits, and no request smaller than one refused.
		for i, desc := range req.Descriptors {
			if rng.IntN(4) == 0 {
				desc.HitsAddend = wrapperspb.UInt64(uint64(rng.IntN(4)))
			}
			if i < len(keys) {
				if min, ok := least[keys[i]]; ok && hitsOf(req, i) < min {
					desc.HitsAddend = wrapperspb.UInt64(min)
				}
			}
		}
		before := time.Now().Unix()
		want, err1 := ref.ShouldRateLimit(ctx(t), req)
		got, err2 := sl.ShouldRateLimit(ctx(t), req)
		sameSecond := time.Now().Unix() == before
		if err1 != nil || err2 != nil {
			t.Fatalf("step %d %v: reference %v, sluice %v", step, req, err1, err2)
		}
		if !sameSecond {
			// The two calls straddled a second: durations may differ by one.
			for i := range want.Statuses {
				if w, g := want.Statuses[i].DurationUntilReset, got.Statuses[i].DurationUntilReset; w != nil && g != nil && w.Seconds == g.Seconds+1 {
					g.Seconds = w.Seconds
				}
			}
		}
		if !proto.Equal(want, got) {
			t.Fatalf("step %d, request %v:\nreference %v\nsluice    %v", step, req, want, got)
		}
		compared++
		if want.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
			over++
		}
		for i, st := range want.Statuses {
			if i < len(keys) && st.CurrentLimit != nil && st.LimitRemaining == 0 {
				if h := max(hitsOf(req, i), 1); h > least[keys[i]] {
					least[keys[i]] = h
				}
			}
		}
	}
	t.Logf("%d requests compared field by field, %d of them over the limit", compared, over)
	if over < compared/20 {
		t.Fatalf("only %d refusals in %d requests: the sequence hardly tests limits", over, compared)
	}
}

// hitsOf is what descriptor i of req costs, as Envoy's rules count it.
func hitsOf(req *pb.RateLimitRequest, i int) uint64 {
	if h := req.Descriptors[i].HitsAddend; h != nil {
		return h.Value
	}
	return max(uint64(req.HitsAddend), 1)
}
