package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	rlqfpb "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3" // the header match input's type
	"github.com/redis/go-redis/v9"
	"github.com/sluice-rl/sluice/internal/quotaplane"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// rlqsHolder is one bucket of a data plane as Envoy's rate_limit_quota
// filter is (internal/quotaplane) on its own stream: it reports the
// bucket's usage and takes the answer's assignment.
type rlqsHolder struct {
	t      *testing.T
	stream rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient
	domain string
	bucket map[string]string
	quotaplane.Bucket
}

func newRLQSHolder(t *testing.T, conn *grpc.ClientConn, parent context.Context, domain string, bucket map[string]string) *rlqsHolder {
	t.Helper()
	ctx, cancel := context.WithCancel(parent)
	t.Cleanup(cancel)
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &rlqsHolder{t: t, stream: st, domain: domain, bucket: bucket}
}

// report sends the usage since the last report (elapsed long) and takes
// the answer's assignment at now.
func (h *rlqsHolder) report(now, elapsed time.Duration) error {
	err := h.stream.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: h.domain,
		BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{h.Usage(&rlqspb.BucketId{Bucket: h.bucket}, elapsed)}})
	if err != nil {
		return err
	}
	resp, err := h.stream.Recv()
	if err != nil {
		return err
	}
	for _, a := range resp.GetBucketAction() {
		if fmt.Sprint(a.GetBucketId().GetBucket()) != fmt.Sprint(h.bucket) {
			h.t.Errorf("an action for bucket %v on the stream of %v", a.GetBucketId().GetBucket(), h.bucket)
			continue
		}
		if err := h.Assign(a, now); err != nil {
			h.t.Error(err)
		}
	}
	return nil
}

func rlqsConn(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

const rlqsRules = `domain: edge
descriptors:
  - key: route
    rate_limit: {name: per-route, unit: second, requests_per_unit: 10, sluice: {algorithm: gcra, burst: 10}}
  - key: closed
    rate_limit: {name: closed, unit: second, requests_per_unit: 0}
`

// Bar R1 of issue #45: three RLQS streams on one bucket whose rule is 10
// per second (GCRA, burst 10) consume their assignments greedily for 20 s,
// reporting every second, on the server's debug clock: each holds a
// token_bucket assignment with a ttl of at least 1 s 2 s after its first
// report (the share follows what each reported in the interval before,
// so a holder that reported first takes more in the first second), and
// the three together admit between 160 and 240, none starved. A bucket no rule
// limits is ALLOW_ALL, a closed one DENY_ALL.
func TestRLQSLeasesBoundTheHolders(t *testing.T) {
	grpcAddr := freeAddr(t)
	s := StartServer(t, "--grpc-addr", grpcAddr, "--rules", writeRules(t, "edge.yaml", rlqsRules), "--requirepass", "pw")
	c := s.Client(func(o *redis.Options) { o.Password = "pw" })
	bearer := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer pw")
	if err := c.Do(ctx(t), "DEBUG", "CLOCK", "SET", time.Now().Add(time.Minute).UnixNano()).Err(); err != nil {
		t.Fatal(err)
	}
	conn := rlqsConn(t, grpcAddr)
	bucket := map[string]string{"route": "/api"}
	var holders []*rlqsHolder
	for range 3 {
		holders = append(holders, newRLQSHolder(t, conn, bearer, "edge", bucket))
	}
	// The first request of each finds no assignment (denied), and its
	// report goes out at once, as Envoy's does for a new bucket.
	for _, h := range holders {
		h.Request(0)
		if err := h.report(0, 0); err != nil {
			t.Fatal(err)
		}
	}
	const seconds, perSecond = 20, 200
	for sec := range seconds {
		for k := range perSecond {
			now := time.Duration(sec)*time.Second + time.Duration(k)*time.Second/perSecond
			for _, h := range holders {
				h.Request(now)
			}
		}
		if err := c.Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", int64(time.Second)).Err(); err != nil {
			t.Fatal(err)
		}
		end := time.Duration(sec+1) * time.Second
		for i, h := range holders {
			if err := h.report(end, time.Second); err != nil {
				t.Fatalf("holder %d's report at %v: %v", i, end, err)
			}
			if sec == 1 {
				qa := h.Last.GetQuotaAssignmentAction()
				if qa.GetRateLimitStrategy().GetTokenBucket() == nil || qa.GetAssignmentTimeToLive().AsDuration() < time.Second {
					t.Fatalf("holder %d at 2 s: %s, want a token bucket with a ttl of 1 s or more", i, h.Describe())
				}
			}
		}
	}
	var total int64
	for _, h := range holders {
		total += h.Admitted
	}
	t.Logf("admitted %d in %d s (per holder %d %d %d)", total, seconds, holders[0].Admitted, holders[1].Admitted, holders[2].Admitted)
	if total < 160 || total > 240 {
		t.Fatalf("three holders admitted %d in 20 s of a 10/s limit, want 160 to 240", total)
	}
	// Not starved: none under half of an even third. (Not even either: a
	// holder that reports first in each second finds the most room.)
	for i, h := range holders {
		if h.Admitted < total/6 {
			t.Errorf("holder %d admitted %d of %d: starved", i, h.Admitted, total)
		}
	}
	free := newRLQSHolder(t, conn, bearer, "edge", map[string]string{"other": "x"})
	if err := free.report(0, 0); err != nil || free.Describe() != "ALLOW_ALL ttl 2s" {
		t.Fatalf("a bucket no rule limits: %s %v", free.Describe(), err)
	}
	closed := newRLQSHolder(t, conn, bearer, "edge", map[string]string{"closed": "x"})
	if err := closed.report(0, 0); err != nil || closed.Describe() != "DENY_ALL ttl 2s" {
		t.Fatalf("a closed bucket: %s %v", closed.Describe(), err)
	}
	unauth, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(context.Background())
	if err == nil {
		_, err = unauth.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a stream without the password: %v", err)
	}
	nodomain, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(bearer)
	if err == nil {
		nodomain.Send(&rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqspb.BucketId{Bucket: map[string]string{"route": "/api"}}}}})
		_, err = nodomain.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a report without a domain: %v", err)
	}
}

// RLQS through a follower of a 3-node group: the share is decided in the
// leader's log, and a report after the leader is killed charges what the
// data plane admitted on the new leader (RL.CHECK there sees it, once,
// however many reports found no leader) and renews the same share.
func TestRLQSThroughAFollower(t *testing.T) {
	grpcAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cl := StartCluster(t, 3, func(i int, _ []string) []string {
		return []string{"--grpc-addr", grpcAddrs[i]}
	}, "--rules", writeRules(t, "edge.yaml", `domain: edge
descriptors:
  - key: route
    rate_limit: {name: per-route, unit: minute, requests_per_unit: 100}
`))
	awaitApplyLevel(t, cl.Nodes...) // RL.SHARE from level 1
	leader := cl.Leader()
	eventually(t, "the leader applied its rules", func() bool {
		v, err := leader.Client().Do(ctx(t), "RL.RULES", "LIST", "edge").Slice()
		return err == nil && len(v) == 1
	})
	var follower *Server
	for _, f := range cl.Followers(leader) {
		follower = f
		break
	}
	conn := rlqsConn(t, grpcAddrs[indexOf(cl, follower)])
	h := newRLQSHolder(t, conn, context.Background(), "edge", map[string]string{"route": "/api"})
	for range 30 {
		h.Request(0)
	}
	if err := h.report(0, time.Second); err != nil {
		t.Fatal(err)
	}
	// 100 a minute is 5 every 3 s; the burst is 2 s of it.
	share := func() string {
		tb := h.Last.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
		return fmt.Sprintf("%d, %d every %d s", tb.GetMaxTokens(), tb.GetTokensPerFill().GetValue(), tb.GetFillInterval().GetSeconds())
	}
	if got := h.Describe(); got != "token_bucket(3) ttl 2s" || share() != "3, 5 every 3 s" {
		t.Fatalf("through a follower: %s, %s", got, share())
	}
	remaining := func(s *Server) int64 {
		return checkInts(t, s.Client(), "RL.CHECK", "edge", "COST", 0, "DESCRIPTOR", "route", "/api")[2]
	}
	if r := remaining(leader); r != 100 {
		t.Fatalf("the leader's counter before any use: remaining %d", r)
	}
	// 12 admitted, 28 denied; reported (again and again) until a leader
	// answers.
	leader.Kill()
	next := cl.Leader()
	h.Allowed, h.Denied = 12, 28
	eventually(t, "a report after the failover is answered by the new leader", func() bool {
		before := h.Last
		if err := h.report(2*time.Second, time.Second); err != nil {
			t.Fatal(err)
		}
		return h.Last != before
	})
	if got := share(); got != "3, 5 every 3 s" {
		t.Fatalf("the share on the new leader: %s", got)
	}
	if r := remaining(next); r != 88 {
		t.Fatalf("the new leader's counter: remaining %d, want 88 (the 12 admitted, charged once)", r)
	}
}

// The README's rate_limit_quota filter configuration is Envoy's: it parses
// into the filter's own types (go-control-plane), passes their validation,
// and points at domain edge with a bucket of route /api reported every
// second.
func TestREADMERLQSFilterParses(t *testing.T) {
	src, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(src), "<!-- envoy-rlqs-filter -->\n```yaml\n")
	if !ok {
		t.Fatal("no envoy-rlqs-filter block in the README")
	}
	block, _, _ := strings.Cut(rest, "```")
	var doc struct {
		Filters []map[string]any `yaml:"http_filters"`
	}
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil || len(doc.Filters) != 1 {
		t.Fatalf("the block: %v %v", doc, err)
	}
	js, err := json.Marshal(doc.Filters[0]["typed_config"])
	if err != nil {
		t.Fatal(err)
	}
	var typed anypb.Any
	if err := protojson.Unmarshal(js, &typed); err != nil {
		t.Fatalf("typed_config: %v", err)
	}
	var cfg rlqfpb.RateLimitQuotaFilterConfig
	if err := typed.UnmarshalTo(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateAll(); err != nil {
		t.Fatalf("Envoy's validation: %v", err)
	}
	if cfg.GetDomain() != "edge" || cfg.GetRlqsServer().GetEnvoyGrpc().GetClusterName() != "sluice" {
		t.Fatalf("domain %q, server %v", cfg.GetDomain(), cfg.GetRlqsServer())
	}
	m := cfg.GetBucketMatchers().GetMatcherList().GetMatchers()
	if len(m) != 1 {
		t.Fatalf("matchers: %v", m)
	}
	var settings rlqfpb.RateLimitQuotaBucketSettings
	if err := m[0].GetOnMatch().GetAction().GetTypedConfig().UnmarshalTo(&settings); err != nil {
		t.Fatal(err)
	}
	if err := settings.ValidateAll(); err != nil {
		t.Fatalf("the bucket settings: %v", err)
	}
	if v := settings.GetBucketIdBuilder().GetBucketIdBuilder()["route"].GetStringValue(); v != "/api" || settings.GetReportingInterval().AsDuration() != time.Second {
		t.Fatalf("bucket route %q, reporting every %v", v, settings.GetReportingInterval().AsDuration())
	}
}

// A bucket a stream stops reporting for two of its ttls is abandoned: the
// answer to the next report carries abandon_action for it (and its share
// is released).
func TestRLQSAbandonsABucketNoLongerReported(t *testing.T) {
	grpcAddr := freeAddr(t)
	s := StartServer(t, "--grpc-addr", grpcAddr, "--rules", writeRules(t, "edge.yaml", rlqsRules))
	c := s.Client()
	if err := c.Do(ctx(t), "DEBUG", "CLOCK", "SET", time.Now().Add(time.Minute).UnixNano()).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := rlqspb.NewRateLimitQuotaServiceClient(rlqsConn(t, grpcAddr)).StreamRateLimitQuotas(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	usage := func(route string) *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
		return &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqspb.BucketId{Bucket: map[string]string{"route": route}},
			TimeElapsed: durationpb.New(time.Second), NumRequestsDenied: 4}
	}
	report := func(routes ...string) map[string]string {
		t.Helper()
		r := &rlqspb.RateLimitQuotaUsageReports{Domain: "edge"}
		for _, route := range routes {
			r.BucketQuotaUsages = append(r.BucketQuotaUsages, usage(route))
		}
		if err := st.Send(r); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, a := range resp.GetBucketAction() {
			kind := "assignment"
			if a.GetAbandonAction() != nil {
				kind = "abandon"
			}
			got[a.GetBucketId().GetBucket()["route"]] = kind
		}
		return got
	}
	if got := report("/a", "/b"); fmt.Sprint(got) != "map[/a:assignment /b:assignment]" {
		t.Fatalf("first report: %v", got)
	}
	if r := checkInts(t, c, "RL.CHECK", "edge", "COST", 0, "DESCRIPTOR", "route", "/a")[2]; r != 11 {
		t.Fatalf("/a after a share, nothing admitted: remaining %d, want the whole 11", r)
	}
	for range 3 { // 3 s: less than two ttls of 2 s
		if err := c.Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", int64(time.Second)).Err(); err != nil {
			t.Fatal(err)
		}
		if got := report("/b"); got["/a"] != "" {
			t.Fatalf("/a abandoned after less than two ttls: %v", got)
		}
	}
	if err := c.Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", int64(time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	if got := report("/b"); got["/a"] != "abandon" || got["/b"] != "assignment" {
		t.Fatalf("after two ttls without /a: %v", got)
	}
}

// A stream that ends keeps its shares counted until their ttls — its
// Envoy admits from its buckets until then — so another holder is not
// given them sooner (issue #58: no Envoy keeps a share the cluster no
// longer counts); once the ttl has passed, it is.
func TestRLQSStreamThatEndsKeepsItsShareToItsTTL(t *testing.T) {
	grpcAddr := freeAddr(t)
	s := StartServer(t, "--grpc-addr", grpcAddr, "--rules", writeRules(t, "edge.yaml", rlqsRules))
	c := s.Client()
	if err := c.Do(ctx(t), "DEBUG", "CLOCK", "SET", time.Now().Add(time.Minute).UnixNano()).Err(); err != nil {
		t.Fatal(err)
	}
	conn := rlqsConn(t, grpcAddr)
	bucket := map[string]string{"route": "/api"}
	first, cancel := context.WithCancel(context.Background())
	a := newRLQSHolder(t, conn, first, "edge", bucket)
	for range 50 {
		a.Request(0)
	}
	if err := a.report(0, time.Second); err != nil {
		t.Fatal(err)
	}
	if tb := a.Last.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket(); tb.GetTokensPerFill().GetValue() != 10 {
		t.Fatalf("the first holder: %s, want the whole 10 a second", a.Describe())
	}
	cancel() // its stream ends; its Envoy keeps the bucket for 2 s
	b := newRLQSHolder(t, conn, context.Background(), "edge", bucket)
	for range 50 {
		b.Request(0)
	}
	eventually(t, "the second holder is answered", func() bool {
		if err := b.report(0, time.Second); err != nil {
			t.Fatal(err)
		}
		return b.Last != nil
	})
	if got := b.Describe(); got != "DENY_ALL ttl 2s" {
		t.Fatalf("the second holder while the first's share is in force: %s, want nothing", got)
	}
	if err := c.Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", int64(2*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		b.Request(2 * time.Second)
	}
	if err := b.report(2*time.Second, time.Second); err != nil {
		t.Fatal(err)
	}
	// The first's ask still counts (two ttls): half the rate.
	if tb := b.Last.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket(); tb.GetTokensPerFill().GetValue() != 5 {
		t.Fatalf("the second holder after the first's ttl: %s, want 5 a second", b.Describe())
	}
}
