package tests

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	rlqfpb "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	ratelimitfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// validated is a message go-control-plane's generated validation checks.
type validated interface{ ValidateAll() error }

// Issue #47 (Envoy, wired): deploy/envoy/envoy.yaml is an Envoy bootstrap
// — it parses into go-control-plane's types, every typed config in it
// unpacks and passes Envoy's own validation — whose filters ask the
// sluice cluster about domain edge; and a sluice on deploy/envoy/rules
// answers what those filters send: the ratelimit filter's descriptor
// path=<path>, the rate_limit_quota filter's bucket path=/edge/.
func TestDeployEnvoyBootstrap(t *testing.T) {
	src, err := os.ReadFile("../deploy/envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("the bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("Envoy's validation of the bootstrap: %v", err)
	}
	unpack := func(what string, m interface{ UnmarshalTo(proto.Message) error }, into proto.Message) {
		t.Helper()
		if err := m.UnmarshalTo(into); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if v, ok := into.(validated); ok {
			if err := v.ValidateAll(); err != nil {
				t.Fatalf("Envoy's validation of %s: %v", what, err)
			}
		}
	}
	var manager hcm.HttpConnectionManager
	unpack("the connection manager", b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig(), &manager)
	var rl ratelimitfilter.RateLimit
	var quota rlqfpb.RateLimitQuotaFilterConfig
	for _, f := range manager.GetHttpFilters() {
		switch f.GetName() {
		case "envoy.filters.http.ratelimit":
			unpack(f.GetName(), f.GetTypedConfig(), &rl)
		case "envoy.filters.http.rate_limit_quota":
			unpack(f.GetName(), f.GetTypedConfig(), &quota)
			var settings rlqfpb.RateLimitQuotaBucketSettings
			unpack("the bucket settings", quota.GetBucketMatchers().GetMatcherList().GetMatchers()[0].GetOnMatch().GetAction().GetTypedConfig(), &settings)
		default:
			msg, err := f.GetTypedConfig().UnmarshalNew()
			if err != nil {
				t.Fatalf("%s: %v", f.GetName(), err)
			}
			if v, ok := msg.(validated); ok {
				if err := v.ValidateAll(); err != nil {
					t.Fatalf("%s: %v", f.GetName(), err)
				}
			}
		}
	}
	if rl.GetDomain() != "edge" || rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName() != "sluice" ||
		quota.GetDomain() != "edge" || quota.GetRlqsServer().GetEnvoyGrpc().GetClusterName() != "sluice" {
		t.Fatalf("the filters: ratelimit %v, rate_limit_quota %v", &rl, &quota)
	}
	var sluiceCluster bool
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == "sluice" {
			sluiceCluster = len(c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()) == 3 && len(c.GetTypedExtensionProtocolOptions()) == 1
		}
	}
	if !sluiceCluster {
		t.Fatal("no sluice cluster of three members speaking HTTP/2")
	}

	// What the filters send, answered by sluice on the shipped rules.
	grpcAddr := freeAddr(t)
	StartServer(t, "--grpc-addr", grpcAddr, "--rules", "../deploy/envoy/rules")
	rc, conn := rlsClient(t, grpcAddr)
	resp, err := rc.ShouldRateLimit(ctx(t), rlsRequest(rl.GetDomain(), 1, "path=/api/orders"))
	if err != nil {
		t.Fatal(err)
	}
	if l := resp.GetStatuses()[0].GetCurrentLimit(); resp.GetOverallCode() != pb.RateLimitResponse_OK || l.GetName() != "per-path" || l.GetRequestsPerUnit() != 100 {
		t.Fatalf("the ratelimit filter's call: %v", resp)
	}
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	h := &rlqsHolder{t: t, stream: st, domain: quota.GetDomain(), bucket: map[string]string{"path": "/edge/"}}
	h.Request(0)
	if err := h.report(0, time.Second); err != nil {
		t.Fatal(err)
	}
	// 100 a minute, shared: 5 every 3 s, and a burst of 2 s of it.
	if got := h.Describe(); got != "token_bucket(3) ttl 2s" {
		t.Fatalf("the rate_limit_quota filter's bucket: %s", got)
	}
}
