// Command leasebench measures what leases save (issue #45): N holders at a
// steady demand above their share of a one-second fixed window decide
// either per request (RL.CHECK, a call each), from leases
// (httplimit.WithLeases, in process), or as Envoy's rate_limit_quota
// filter does from RLQS shares (issue #58: internal/quotaplane's bucket,
// a report a second on a stream each). It reports the decisions, the calls
// the server took (INFO commandstats), the server's CPU (/proc/<pid>/stat)
// per million decisions, and what was admitted in each whole window
// against the limit.
//
// scripts/bench_leases.sh runs it in alternating pairs against one server.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/httplimit"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "sluice's address")
	pid := flag.Int("pid", 0, "the server's process id (its CPU is read from /proc)")
	mode := flag.String("mode", "check", "check (RL.CHECK per request), lease (httplimit.WithLeases) or rlqs (Envoy-like holders of RLQS shares)")
	grpcAddr := flag.String("grpc", "", "sluice's gRPC address (mode rlqs)")
	holders := flag.Int("holders", 4, "holders (processes at the edge)")
	rate := flag.Int("rate", 2500, "requests per second per holder")
	limit := flag.Int64("limit", 5000, "the rule's limit per second (for the report)")
	duration := flag.Duration("duration", 10*time.Second, "how long to run")
	round := flag.String("round", "", "a label for the report")
	flag.Parse()
	c := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 64, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	calls0 := calls(ctx, c)
	cpu0 := cpuSeconds(*pid)
	var decisions atomic.Int64
	var mu sync.Mutex
	admitted := map[int64]int64{} // per Unix second: the rule's windows
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	rules := httplimit.Rules{Domain: "bench", Descriptors: func(*http.Request, string) [][]httplimit.Entry {
		return [][]httplimit.Entry{{{Key: "route", Value: "/api"}}}
	}}
	start := time.Now()
	deadline := start.Add(*duration)
	var wg sync.WaitGroup
	var leases []*httplimit.Leases
	var reports atomic.Int64
	for h := range *holders {
		var limit httplimit.Limit = rules
		if *mode == "rlqs" {
			p, err := newQuotaHolder(ctx, *grpcAddr, start, &reports)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			defer p.close()
			limit = p
		}
		if *mode == "lease" {
			l, err := httplimit.WithLeases(rules, httplimit.LeaseOptions{Holder: "bench-" + strconv.Itoa(h), TTL: time.Second})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			leases = append(leases, l)
			limit = l
		}
		// A pacer per holder hands its workers the requests at its rate.
		work := make(chan struct{}, *rate)
		go func() {
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			sent := 0
			for now := range tick.C {
				if now.After(deadline) {
					close(work)
					return
				}
				due := int(float64(*rate) * now.Sub(start).Seconds())
				for ; sent < due; sent++ {
					select {
					case work <- struct{}{}:
					default: // the workers are behind: the request is dropped, not queued
					}
				}
			}
		}()
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range work {
					d, err := limit.Check(ctx, c, req, "/api")
					if err != nil {
						continue
					}
					decisions.Add(1)
					if !d.Limited {
						s := time.Now().Unix()
						mu.Lock()
						admitted[s]++
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, l := range leases {
		l.Close(ctx)
	}
	elapsed := time.Since(start)
	cpu := cpuSeconds(*pid) - cpu0
	n := decisions.Load()
	k := calls(ctx, c) - calls0 + reports.Load()
	// Whole windows only: not the first second or the last.
	var ratios []float64
	first, last := start.Unix()+1, deadline.Unix()-1
	for s := first; s < last; s++ {
		ratios = append(ratios, float64(admitted[s])/float64(*limit))
	}
	slices.Sort(ratios)
	med, worst := 0.0, 0.0
	if len(ratios) > 0 {
		med, worst = ratios[len(ratios)/2], ratios[len(ratios)-1]
	}
	fmt.Printf("%s mode=%s holders=%d decisions=%d (%.0f/s) server_calls=%d calls_per_1M=%.0f server_cpu_s=%.2f cpu_us_per_decision=%.3f admitted_per_window/limit median=%.3f max=%.3f\n",
		*round, *mode, *holders, n, float64(n)/elapsed.Seconds(), k, float64(k)/float64(max(n, 1))*1e6, cpu, cpu/float64(max(n, 1))*1e6, med, worst)
}

// calls is how many RL.CHECK and RL.LEASE calls the server ran.
func calls(ctx context.Context, c *redis.Client) int64 {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var n int64
	for _, line := range strings.Split(info, "\r\n") {
		for _, name := range []string{"rl.check", "rl.lease"} {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+name+":calls="); ok {
				v, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
				n += v
			}
		}
	}
	return n
}

// cpuSeconds is the process's user + system CPU time (0 without a pid).
func cpuSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: utime is the 12th,
	// stime the 13th (man 5 proc), in clock ticks of 1/100 s.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100
}
