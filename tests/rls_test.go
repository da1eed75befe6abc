package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The rule files of the rate limit service tests: the shapes
// envoyproxy/ratelimit's integration tests use.
const (
	rlsBasic = `domain: basic
descriptors:
  - key: key1
    rate_limit: {unit: second, requests_per_unit: 50}
  - key: one_per_minute
    rate_limit: {unit: minute, requests_per_unit: 1}
`
	rlsAnother = `domain: another
descriptors:
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key3
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: key4
    rate_limit: {unit: day, requests_per_unit: 20}
  - key: free
    rate_limit: {unlimited: true}
  - key: canary
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: client
    value: web
    descriptors:
      - key: path
        rate_limit: {unit: minute, requests_per_unit: 3}
      - key: path
        value: /admin
        rate_limit: {name: admin, unit: minute, requests_per_unit: 1}
`
)

// rlsRulesDir writes the rule files into one directory for --rules.
func rlsRulesDir(t testing.TB) string {
	dir := t.TempDir()
	for name, text := range map[string]string{"basic.yaml": rlsBasic, "another.yaml": rlsAnother} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// rlsClient dials a node's gRPC port with the generated client Envoy uses.
func rlsClient(t testing.TB, addr string) (pb.RateLimitServiceClient, *grpc.ClientConn) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewRateLimitServiceClient(conn), conn
}

// rlsRequest builds a request: each descriptor is "k=v,k=v".
func rlsRequest(domain string, hits uint32, descs ...string) *pb.RateLimitRequest {
	req := &pb.RateLimitRequest{Domain: domain, HitsAddend: hits}
	for _, d := range descs {
		desc := &ratelimitv3.RateLimitDescriptor{}
		for _, kv := range strings.Split(d, ",") {
			k, v, _ := strings.Cut(kv, "=")
			desc.Entries = append(desc.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	return req
}

func status1(code pb.RateLimitResponse_Code, rpu uint32, unit pb.RateLimitResponse_RateLimit_Unit, name string, remaining uint32, reset int64) *pb.RateLimitResponse_DescriptorStatus {
	return &pb.RateLimitResponse_DescriptorStatus{Code: code, LimitRemaining: remaining,
		CurrentLimit:       &pb.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: rpu, Unit: unit},
		DurationUntilReset: &durationpb.Duration{Seconds: reset}}
}

func sameResponse(t testing.TB, what string, got, want *pb.RateLimitResponse) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

const (
	codeOK   = pb.RateLimitResponse_OK
	codeOver = pb.RateLimitResponse_OVER_LIMIT
	unitSec  = pb.RateLimitResponse_RateLimit_SECOND
	unitMin  = pb.RateLimitResponse_RateLimit_MINUTE
	unitHour = pb.RateLimitResponse_RateLimit_HOUR
)

// The behaviours envoyproxy/ratelimit's integration tests check, through
// Envoy's generated client, at instants the test clock fixes: 17 s into a
// minute (and an hour, and a day).
func TestRLSLikeEnvoy(t *testing.T) {
	grpcAddr := freeAddr(t)
	s := StartServer(t, "--rules", rlsRulesDir(t), "--grpc-addr", grpcAddr)
	setClock(t, s.Client(), future+17e9)
	c, _ := rlsClient(t, grpcAddr)
	ask := func(req *pb.RateLimitRequest) *pb.RateLimitResponse {
		t.Helper()
		resp, err := c.ShouldRateLimit(ctx(t), req)
		if err != nil {
			t.Fatalf("%v: %v", req, err)
		}
		return resp
	}

	sameResponse(t, "unknown domain", ask(rlsRequest("foo", 1, "hello=world")), &pb.RateLimitResponse{
		OverallCode: codeOK, Statuses: []*pb.RateLimitResponse_DescriptorStatus{{Code: codeOK}}})
	sameResponse(t, "per second", ask(rlsRequest("basic", 1, "key1=foo")), &pb.RateLimitResponse{
		OverallCode: codeOK, Statuses: []*pb.RateLimitResponse_DescriptorStatus{status1(codeOK, 50, unitSec, "", 49, 1)}})
	for i := range 25 {
		code, remaining := codeOK, uint32(20-(i+1))
		if i >= 20 {
			code, remaining = codeOver, 0
		}
		sameResponse(t, fmt.Sprintf("per minute, call %d", i), ask(rlsRequest("another", 1, "key2=r1")), &pb.RateLimitResponse{
			OverallCode: code, Statuses: []*pb.RateLimitResponse_DescriptorStatus{status1(code, 20, unitMin, "", remaining, 43)}})
	}
	// Two descriptors in one domain: the hourly one refuses from the 11th
	// call; a refused request charges neither (all or nothing), so the
	// per-minute one stays at 10 remaining.
	for i := range 15 {
		code, rem1, rem2 := codeOK, uint32(20-(i+1)), uint32(10-(i+1))
		if i >= 10 {
			code, rem1, rem2 = codeOver, 10, 0
		}
		sameResponse(t, fmt.Sprintf("two descriptors, call %d", i), ask(rlsRequest("another", 1, "key2=r2", "key3=r2")), &pb.RateLimitResponse{
			OverallCode: code, Statuses: []*pb.RateLimitResponse_DescriptorStatus{
				status1(codeOK, 20, unitMin, "", rem1, 43), status1(code, 10, unitHour, "", rem2, 3583)}})
	}
	// Nested descriptors: the leaf-most rule, the named one by value.
	sameResponse(t, "nested", ask(rlsRequest("another", 1, "client=web,path=/x", "client=web,path=/admin")), &pb.RateLimitResponse{
		OverallCode: codeOK, Statuses: []*pb.RateLimitResponse_DescriptorStatus{
			status1(codeOK, 3, unitMin, "", 2, 43), status1(codeOK, 1, unitMin, "admin", 0, 43)}})
	sameResponse(t, "nested over", ask(rlsRequest("another", 1, "client=web,path=/admin")), &pb.RateLimitResponse{
		OverallCode: codeOver, Statuses: []*pb.RateLimitResponse_DescriptorStatus{status1(codeOver, 1, unitMin, "admin", 0, 43)}})
	sameResponse(t, "deeper than the rules", ask(rlsRequest("another", 1, "client=web,path=/x,extra=1")), &pb.RateLimitResponse{
		OverallCode: codeOK, Statuses: []*pb.RateLimitResponse_DescriptorStatus{{Code: codeOK}}})
	// Unlimited, and shadow mode (counts, never refuses).
	sameResponse(t, "unlimited", ask(rlsRequest("another", 1, "free=x")), &pb.RateLimitResponse{
		OverallCode: codeOK, Statuses: []*pb.RateLimitResponse_DescriptorStatus{{Code: codeOK, LimitRemaining: 1<<32 - 1}}})
	for i := range 3 {
		sameResponse(t, fmt.Sprintf("shadow %d", i), ask(rlsRequest("another", 1, "canary=c")), &pb.RateLimitResponse{
			OverallCode: codeOK, Statuses: []*pb.RateLimitResponse_DescriptorStatus{status1(codeOK, 1, unitMin, "", 0, 43)}})
	}
	// hits_addend: the request's, and a descriptor's own (0 only checks).
	sameResponse(t, "hits_addend", ask(rlsRequest("another", 5, "key4=h")), &pb.RateLimitResponse{
		OverallCode: codeOK, Statuses: []*pb.RateLimitResponse_DescriptorStatus{status1(codeOK, 20, pb.RateLimitResponse_RateLimit_DAY, "", 15, 86383)}})
	peek := rlsRequest("another", 5, "key4=h")
	peek.Descriptors[0].HitsAddend = wrapperspb.UInt64(0)
	sameResponse(t, "descriptor hits_addend 0", ask(peek), &pb.RateLimitResponse{
		OverallCode: codeOK, Statuses: []*pb.RateLimitResponse_DescriptorStatus{status1(codeOK, 20, pb.RateLimitResponse_RateLimit_DAY, "", 15, 86383)}})
	// A descriptor's own limit replaces its rule: a fixed window.
	own := rlsRequest("another", 1, "key2=own")
	own.Descriptors[0].Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	sameResponse(t, "descriptor limit", ask(own), &pb.RateLimitResponse{
		OverallCode: codeOK, Statuses: []*pb.RateLimitResponse_DescriptorStatus{status1(codeOK, 1, unitHour, "", 0, 3583)}})
	sameResponse(t, "descriptor limit over", ask(own), &pb.RateLimitResponse{
		OverallCode: codeOver, Statuses: []*pb.RateLimitResponse_DescriptorStatus{status1(codeOver, 1, unitHour, "", 0, 3583)}})

	// duration_until_reset follows the clock.
	advance(t, s.Client(), 2*time.Second)
	if d := ask(rlsRequest("another", 1, "key4=durTest")).Statuses[0].DurationUntilReset.Seconds; d != 86381 {
		t.Fatalf("duration after 2 s: %d", d)
	}
}

// Bad requests are INVALID_ARGUMENT with a reason and charge nothing; a
// caller that gives up mid-call and many concurrent calls leave the
// server up.
func TestRLSBadRequestsAndLoad(t *testing.T) {
	grpcAddr := freeAddr(t)
	s := StartServer(t, "--rules", rlsRulesDir(t), "--grpc-addr", grpcAddr)
	setClock(t, s.Client(), future)
	c, _ := rlsClient(t, grpcAddr)
	many := rlsRequest("another", 1)
	for range 65 {
		many.Descriptors = append(many.Descriptors, rlsRequest("x", 0, "key2=bad").Descriptors...)
	}
	badUnit := rlsRequest("another", 1, "key2=bad")
	badUnit.Descriptors[0].Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}
	ages := rlsRequest("another", 1, "key2=bad")
	ages.Descriptors[0].Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_YEAR,
		UnitMultiplier: wrapperspb.UInt32(300)}
	for _, tc := range []struct {
		req  *pb.RateLimitRequest
		want string
	}{
		{rlsRequest("", 1, "key2=bad"), "domain must not be empty"},
		{&pb.RateLimitRequest{Domain: "another"}, "descriptor list must not be empty"},
		{&pb.RateLimitRequest{Domain: "another", Descriptors: []*ratelimitv3.RateLimitDescriptor{{}}}, "has no entries"},
		{rlsRequest("another", 1, "=v"), "key must not be empty"},
		{many, "more than 64"},
		{rlsRequest("another", 1, "key2="+strings.Repeat("v", 5000)), "more than 4096"},
		{badUnit, "limit unit"},
		{ages, "longer than 292 years"},
	} {
		_, err := c.ShouldRateLimit(ctx(t), tc.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.80v: %v, want INVALID_ARGUMENT (%s)", tc.req, err, tc.want)
		}
	}
	if resp, err := c.ShouldRateLimit(ctx(t), rlsRequest("another", 1, "key2=bad")); err != nil || resp.Statuses[0].LimitRemaining != 19 {
		t.Fatalf("after the bad requests: %v %v (they must charge nothing)", resp, err)
	}

	// Callers that give up at once, and 10k concurrent calls.
	// Each is answered (a decision) or CANCELED, never anything else, and
	// the service answers the next caller.
	cancelled := 0
	for range 50 {
		cctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(50 * time.Microsecond); cancel() }()
		resp, err := c.ShouldRateLimit(cctx, rlsRequest("basic", 1, "key1=cancel"))
		switch {
		case status.Code(err) == codes.Canceled:
			cancelled++
		case err != nil:
			t.Fatalf("a call cancelled by its caller: %v, want a decision or CANCELED", err)
		case len(resp.Statuses) != 1 || resp.Statuses[0].CurrentLimit == nil:
			t.Fatalf("a call cancelled by its caller answered %v", resp)
		}
	}
	t.Logf("%d of 50 calls cancelled before their answer", cancelled)
	if _, err := c.ShouldRateLimit(ctx(t), rlsRequest("basic", 1, "key1=after-cancel")); err != nil {
		t.Fatalf("after the cancelled calls: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed, errs := 0, 0
	for i := range 10_000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.ShouldRateLimit(context.Background(), rlsRequest("another", 1, fmt.Sprintf("key3=load%d", i%100)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				return
			}
			if resp.OverallCode == codeOK {
				allowed++
			}
		}()
	}
	wg.Wait()
	if errs != 0 || allowed != 100*10 {
		t.Fatalf("10k concurrent calls: %d errors, %d allowed (want 0 and 1000: 10 an hour on 100 keys)", errs, allowed)
	}
	if role(t, s) == "" {
		t.Fatal("the server stopped answering")
	}
}

// gRPC health, reflection, the HTTP twin, response headers, reloads and
// --requirepass.
func TestRLSServiceSurface(t *testing.T) {
	dir := rlsRulesDir(t)
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	s := StartServer(t, "--rules", dir, "--grpc-addr", grpcAddr, "--http-addr", httpAddr, "--rls-response-headers")
	setClock(t, s.Client(), future+17e9)
	c, conn := rlsClient(t, grpcAddr)

	h, err := healthpb.NewHealthClient(conn).Check(ctx(t), &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	ref, err := stream.Recv()
	if err != nil || !strings.Contains(fmt.Sprint(ref.GetListServicesResponse()), "envoy.service.ratelimit.v3.RateLimitService") {
		t.Fatalf("reflection: %v %v", ref, err)
	}

	resp, err := c.ShouldRateLimit(ctx(t), rlsRequest("another", 1, "key2=h", "key3=h"))
	if err != nil {
		t.Fatal(err)
	}
	var headers []string
	for _, hv := range resp.ResponseHeadersToAdd {
		headers = append(headers, hv.Key+": "+hv.Value)
	}
	want := []string{"RateLimit-Limit: 10", "RateLimit-Remaining: 9", "RateLimit-Reset: 3583",
		`RateLimit-Policy: "default";q=10;w=3600`, `RateLimit: "default";r=9;t=3583`}
	if strings.Join(headers, "\n") != strings.Join(want, "\n") {
		t.Fatalf("headers:\n%s\nwant\n%s", strings.Join(headers, "\n"), strings.Join(want, "\n"))
	}

	// The HTTP twin: the same decision in protojson, 429 when over.
	post := func(body string) (int, string) {
		r, err := http.Post("http://"+httpAddr+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	code, body := post(`{"domain":"basic","descriptors":[{"entries":[{"key":"one_per_minute","value":"j"}]}]}`)
	var jr pb.RateLimitResponse
	if err := protojson.Unmarshal([]byte(body), &jr); code != 200 || err != nil || jr.OverallCode != codeOK || jr.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("POST /json: %d %s", code, body)
	}
	if code, body = post(`{"domain":"basic","descriptors":[{"entries":[{"key":"one_per_minute","value":"j"}]}]}`); code != 429 || !strings.Contains(body, "OVER_LIMIT") {
		t.Fatalf("POST /json over the limit: %d %s", code, body)
	}
	// is_negative_hits gives units back, over gRPC and /json: OK, and the
	// state after it.
	if _, err := c.ShouldRateLimit(ctx(t), rlsRequest("another", 12, "key4=refund")); err != nil {
		t.Fatal(err)
	}
	back := rlsRequest("another", 5, "key4=refund")
	back.Descriptors[0].IsNegativeHits = true
	if resp, err := c.ShouldRateLimit(ctx(t), back); err != nil || resp.OverallCode != codeOK || resp.Statuses[0].Code != codeOK || resp.Statuses[0].LimitRemaining != 13 {
		t.Fatalf("is_negative_hits: %v %v", resp, err)
	}
	code, body = post(`{"domain":"another","hitsAddend":3,"descriptors":[{"entries":[{"key":"key4","value":"refund"}],"isNegativeHits":true}]}`)
	if err := protojson.Unmarshal([]byte(body), &jr); code != 200 || err != nil || jr.Statuses[0].LimitRemaining != 16 {
		t.Fatalf("POST /json is_negative_hits: %d %s", code, body)
	}
	if resp, _ := c.ShouldRateLimit(ctx(t), rlsRequest("another", 0, "key4=refund")); resp.Statuses[0].LimitRemaining != 15 {
		t.Fatalf("after the refunds: %v", resp)
	}
	if code, body = post(`{"domain":""}`); code != 400 || !strings.Contains(body, "domain must not be empty") {
		t.Fatalf("POST /json bad: %d %s", code, body)
	}
	if code, _ = post(`not json`); code != 400 {
		t.Fatalf("POST /json not json: %d", code)
	}
	r, err := http.Get("http://" + httpAddr + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || string(b) != "OK" {
		t.Fatalf("/healthcheck: %d %q", r.StatusCode, b)
	}
	mr, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mr.Body)
	mr.Body.Close()
	for _, series := range []string{`sluice_rls_requests_total{result="ok",transport="grpc"}`, `sluice_rls_requests_total{result="over_limit",transport="http"}`,
		`sluice_rls_decisions_total{code="OVER_LIMIT",domain="basic"}`, `sluice_rls_duration_seconds_count{transport="grpc"}`,
		`sluice_rls_requests_total{result="invalid",transport="http"}`} {
		if !bytes.Contains(mb, []byte(series)) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	if bytes.Contains(mb, []byte(`="j"`)) || bytes.Contains(mb, []byte(`"h"`)) {
		t.Error("a descriptor value is a metric label")
	}

	// A reload changes the limit the service applies.
	path := filepath.Join(dir, "basic.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(rlsBasic, "requests_per_unit: 50", "requests_per_unit: 70", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, "the reloaded limit", func() bool {
		resp, err := c.ShouldRateLimit(ctx(t), rlsRequest("basic", 1, "key1=reload"))
		return err == nil && resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() == 70
	})
}

// With --requirepass, calls must carry it as a bearer token.
func TestRLSRequirePass(t *testing.T) {
	grpcAddr := freeAddr(t)
	StartServer(t, "--rules", rlsRulesDir(t), "--grpc-addr", grpcAddr, "--requirepass", "s3cret")
	c, _ := rlsClient(t, grpcAddr)
	if _, err := c.ShouldRateLimit(ctx(t), rlsRequest("basic", 1, "key1=a")); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without the password: %v", err)
	}
	authed := metadata.AppendToOutgoingContext(ctx(t), "authorization", "Bearer s3cret")
	if resp, err := c.ShouldRateLimit(authed, rlsRequest("basic", 1, "key1=a")); err != nil || resp.OverallCode != codeOK {
		t.Fatalf("with the password: %v %v", resp, err)
	}
}
