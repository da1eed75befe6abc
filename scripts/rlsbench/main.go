// Command rlsbench loads a rate limit service (sluice's or
// envoyproxy/ratelimit's) with ShouldRateLimit calls through Envoy's own
// generated client: one descriptor of random values, a fixed number of
// concurrent callers, for a fixed time; it prints calls per second and the
// latency percentiles. scripts/bench_rls.sh runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "gRPC address of the service")
	callers := flag.Int("c", 10, "concurrent callers")
	dur := flag.Duration("d", 5*time.Second, "how long to measure")
	warm := flag.Duration("warmup", time.Second, "calls before measuring")
	domain := flag.String("domain", "bench", "domain")
	key := flag.String("key", "user", "descriptor key")
	values := flag.Int("values", 100000, "distinct random values")
	label := flag.String("label", "", "row label")
	token := flag.String("token", "", "the service's password, sent as authorization: Bearer <token>")
	flag.Parse()

	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer conn.Close()
	c := pb.NewRateLimitServiceClient(conn)
	callCtx := context.Background()
	if *token != "" {
		callCtx = metadata.AppendToOutgoingContext(callCtx, "authorization", "Bearer "+*token)
	}
	run := func(d time.Duration) ([]time.Duration, int) {
		var mu sync.Mutex
		var all []time.Duration
		errs := 0
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for w := range *callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
				var lat []time.Duration
				bad := 0
				for time.Now().Before(end) {
					req := &pb.RateLimitRequest{Domain: *domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
						Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: *key, Value: strconv.Itoa(rng.IntN(*values))}}}}}
					t0 := time.Now()
					_, err := c.ShouldRateLimit(callCtx, req)
					if err != nil {
						bad++
						continue
					}
					lat = append(lat, time.Since(t0))
				}
				mu.Lock()
				all = append(all, lat...)
				errs += bad
				mu.Unlock()
			}()
		}
		wg.Wait()
		return all, errs
	}
	if _, errs := run(*warm); errs > 0 {
		fmt.Fprintf(os.Stderr, "%s: %d calls failed during the warm-up\n", *label, errs)
	}
	lat, errs := run(*dur)
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	// Calls per second count answered calls only.
	fmt.Printf("%-28s c=%-3d %9.0f/s  p50 %6.2f ms  p99 %6.2f ms  errors %d\n",
		*label, *callers, float64(len(lat))/dur.Seconds(), pct(0.50), pct(0.99), errs)
}
