package tests

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A GCRA rule with no window boundary to cross while a test runs: 50
// admitted, then one more every half hour.
const rlsClusterRules = `domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: day
      requests_per_unit: 48
      sluice: {algorithm: gcra, burst: 49}
  - key: path
    rate_limit: {unit: day, requests_per_unit: 1000}
`

// startRLSCluster starts a 3-node cluster with rlsClusterRules, each node
// serving gRPC at the address of the same index.
func startRLSCluster(t *testing.T) (*Cluster, []string) {
	rules := writeRules(t, "edge.yaml", rlsClusterRules)
	grpcAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cl := StartCluster(t, 3, func(i int, _ []string) []string {
		return []string{"--grpc-addr", grpcAddrs[i]}
	}, "--rules", rules)
	return cl, grpcAddrs
}

// Every node of a 3-node cluster answers: a follower forwards to the
// leader and returns its answer, so calls spread over all nodes count on
// one counter; killing the leader under load admits no more than the
// limit; a node's health goes NOT_SERVING while it has no leader, then
// SERVING again.
func TestRLSCluster(t *testing.T) {
	cl, grpcAddrs := startRLSCluster(t)
	leader := cl.Leader()
	eventually(t, "the leader applied its rules", func() bool {
		c, _ := rlsClient(t, grpcAddrs[indexOf(cl, leader)])
		resp, err := c.ShouldRateLimit(ctx(t), rlsRequest("edge", 0, "path=warmup"))
		return err == nil && resp.Statuses[0].CurrentLimit != nil
	})
	clients := make([]pb.RateLimitServiceClient, 3)
	for i, a := range grpcAddrs {
		clients[i], _ = rlsClient(t, a)
	}
	// Calls round-robin over the nodes: one counter, remaining falls by
	// one per call whoever answers.
	for i := range 9 {
		resp, err := clients[i%3].ShouldRateLimit(ctx(t), rlsRequest("edge", 1, "path=/spread"))
		if err != nil {
			t.Fatalf("call %d to node %d: %v", i, i%3+1, err)
		}
		if got := resp.Statuses[0].LimitRemaining; got != uint32(999-i) {
			t.Fatalf("call %d to node %d: remaining %d", i, i%3+1, got)
		}
	}
	// The same call through a follower and through the leader gets the
	// same answer shape (the follower's is the leader's).
	follower := cl.Followers(leader)[0]
	viaFollower, err := clients[indexOf(cl, follower)].ShouldRateLimit(ctx(t), rlsRequest("edge", 1, "path=/same"))
	if err != nil {
		t.Fatal(err)
	}
	viaLeader, err := clients[indexOf(cl, leader)].ShouldRateLimit(ctx(t), rlsRequest("edge", 1, "path=/same"))
	if err != nil {
		t.Fatal(err)
	}
	if viaFollower.Statuses[0].LimitRemaining != viaLeader.Statuses[0].LimitRemaining+1 {
		t.Fatalf("follower %v, then leader %v: not one counter", viaFollower, viaLeader)
	}

	// Load on one tenant from every node; kill the leader midway.
	var admitted, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				resp, err := clients[w%3].ShouldRateLimit(cctx, rlsRequest("edge", 1, "tenant=t1"))
				cancel()
				switch {
				case err != nil:
					failed.Add(1)
					time.Sleep(5 * time.Millisecond)
				case resp.OverallCode == pb.RateLimitResponse_OK:
					admitted.Add(1)
				}
			}
		}()
	}
	eventually(t, "some admissions before the kill", func() bool { return admitted.Load() >= 10 })
	leader.Kill()
	newLeader := cl.Leader()
	eventually(t, "admissions through the new leader", func() bool {
		c := clients[indexOf(cl, newLeader)]
		resp, err := c.ShouldRateLimit(ctx(t), rlsRequest("edge", 0, "path=/after"))
		return err == nil && resp.OverallCode == pb.RateLimitResponse_OK
	})
	time.Sleep(300 * time.Millisecond) // more load after the failover, past the limit
	close(stop)
	wg.Wait()
	if n := admitted.Load(); n > 50 {
		t.Fatalf("%d admitted of a limit of 50 (burst 49 + 1) through a leader kill", n)
	}
	t.Logf("admitted %d, failed calls %d", admitted.Load(), failed.Load())
	// Health: the survivor that does not lead says NOT_SERVING while it
	// cannot decide — its leader killed, no majority left — and SERVING
	// again once a majority elects one (the first leader restarted).
	var survivor *Server
	for _, n := range cl.Followers(newLeader) {
		survivor = n
	}
	_, sconn := rlsClient(t, grpcAddrs[indexOf(cl, survivor)])
	// A bounded wait: a status that never comes fails the test, not the
	// package's timeout.
	wctx, cancelWatch := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelWatch()
	watch, err := healthpb.NewHealthClient(sconn).Watch(wctx, &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
	if err != nil {
		t.Fatal(err)
	}
	next := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for {
			r, err := watch.Recv()
			if err != nil {
				t.Fatalf("health watch, waiting for %v: %v", want, err)
			}
			if r.Status == want {
				return
			}
		}
	}
	next(healthpb.HealthCheckResponse_SERVING)
	newLeader.Kill()
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	leader.Start()
	next(healthpb.HealthCheckResponse_SERVING)
}

// indexOf is s's position in the cluster.
func indexOf(c *Cluster, s *Server) int {
	for i, n := range c.Nodes {
		if n == s {
			return i
		}
	}
	return -1
}

// A follower forwards its callers' calls in pipelines over a few
// connections: 50 concurrent callers through one follower are answered
// each with its own reply — every remaining count from 999 down to 500
// exactly once — over at most forwardPipelines (4) connections to the
// leader (and a warm spare), not one per call in flight.
func TestRLSFollowerPipelinesForwardedCalls(t *testing.T) {
	cl, grpcAddrs := startRLSCluster(t)
	leader := cl.Leader()
	follower := cl.Followers(leader)[0]
	c, _ := rlsClient(t, grpcAddrs[indexOf(cl, follower)])
	eventually(t, "the follower forwards", func() bool {
		resp, err := c.ShouldRateLimit(ctx(t), rlsRequest("edge", 0, "path=warmup"))
		return err == nil && resp.Statuses[0].CurrentLimit != nil
	})
	seen := make([]atomic.Int32, 1000)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				resp, err := c.ShouldRateLimit(context.Background(), rlsRequest("edge", 1, "path=/piped"))
				if err != nil {
					t.Error(err)
					return
				}
				seen[resp.Statuses[0].LimitRemaining].Add(1)
			}
		}()
	}
	wg.Wait()
	for r := 500; r < 1000; r++ {
		if n := seen[r].Load(); n != 1 {
			t.Fatalf("remaining %d answered %d times", r, n)
		}
	}
	clients, err := leader.Client().ClientList(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	// This client's, and the follower's pipelines (4) with at most one
	// spare its pool keeps warm: before pipelines, one per call in flight.
	if n := strings.Count(clients, "\n"); n > 1+4+1 {
		t.Fatalf("the leader holds %d connections (the follower's and this one):\n%s", n, clients)
	}
}
