// Command groupsbench measures what a sharded cluster's decisions cost in
// CPU, summed over every member process (from /proc): what predicts real
// machines when this box cannot show throughput scaling. It offers a fixed
// rate of decisions through a go-redis ClusterClient for a while, then
// prints the decisions answered, errors, latency percentiles and the CPU
// microseconds each decision took across the given processes.
//
//	-mode idle            no load: what the members spend by themselves
//	-mode throttle        CL.THROTTLE on random keys (single-group commands)
//	-mode single|cross    RL.CHECK of two descriptors whose counters sit in
//	                      the domain's group (single) or one in another
//	                      group (cross: split, reserved, kept)
//
// scripts/bench_groups.sh runs it in alternating rounds.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/slot"
)

func main() {
	addrs := flag.String("addrs", "127.0.0.1:7001", "comma-separated members (the client learns the rest)")
	mode := flag.String("mode", "throttle", "throttle, single or cross")
	rules := flag.String("rules", "", "the rule file the servers load (single, cross: to place counters)")
	split := flag.Int("split", 8192, "the first slot of the second group (single, cross)")
	rate := flag.Int("rate", 4000, "decisions offered per second (0: each caller sends its next as soon as it has an answer)")
	conns := flag.Int("conns", 50, "callers")
	duration := flag.Duration("duration", 10*time.Second, "how long to run")
	pids := flag.String("pids", "", "comma-separated pids of every member (CPU is summed over them)")
	flag.Parse()

	procs := strings.Split(*pids, ",")
	if *mode == "idle" {
		// What the members spend with no load (heartbeats, ticks, probes):
		// the bench subtracts it.
		cpu0 := cpuSeconds(procs)
		time.Sleep(*duration)
		fmt.Printf("idle: cpu %.2fs in %.1fs\n", cpuSeconds(procs)-cpu0, duration.Seconds())
		return
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(*addrs, ","), PoolSize: *conns, MaxRedirects: 8})
	defer cc.Close()
	ctx := context.Background()
	next := commands(*mode, *rules, *split)
	// Warm up: the client learns the slots, the servers their leaders.
	for i := range 200 {
		if err := cc.Do(ctx, next(i)...).Err(); err != nil && i == 199 {
			fmt.Fprintln(os.Stderr, "groupsbench: warm-up:", err)
			os.Exit(1)
		}
	}
	cpu0 := cpuSeconds(procs)
	var ops, errs atomic.Int64
	lat := make([][]time.Duration, *conns)
	var interval time.Duration
	if *rate > 0 {
		interval = time.Duration(int64(time.Second) * int64(*conns) / int64(*rate))
	}
	start := time.Now()
	deadline := start.Add(*duration)
	var wg sync.WaitGroup
	for w := range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each caller sends at rate/conns, evenly spaced, from its own
			// offset: an open loop, so batching is the same across runs.
			at := start.Add(interval * time.Duration(w) / time.Duration(*conns))
			for i := w; ; i += *conns {
				if d := time.Until(at); d > 0 {
					time.Sleep(d)
				}
				if time.Now().After(deadline) {
					return
				}
				t0 := time.Now()
				v, err := cc.Do(ctx, next(i)...).Slice()
				if err != nil || len(v) < 2 {
					errs.Add(1)
				} else {
					ops.Add(1)
					lat[w] = append(lat[w], time.Since(t0))
				}
				at = at.Add(interval)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuSeconds(procs) - cpu0
	all := slices.Concat(lat...)
	slices.Sort(all)
	q := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[int(p*float64(len(all)-1))]
	}
	n := ops.Load()
	fmt.Printf("%s: %d decisions in %.1fs (%.0f/s offered %d/s, 0: closed loop), %d errors, p50 %s p99 %s, cpu %.2fs = %.1f µs/decision\n",
		*mode, n, elapsed.Seconds(), float64(n)/elapsed.Seconds(), *rate, errs.Load(),
		q(0.5).Round(time.Microsecond), q(0.99).Round(time.Microsecond), cpu, cpu*1e6/float64(max(n, 1)))
}

// commands returns the i-th command of a mode.
func commands(mode, rulesPath string, split int) func(i int) []any {
	switch mode {
	case "throttle":
		return func(i int) []any {
			return []any{"CL.THROTTLE", "k:" + strconv.Itoa(i%100000), 1000000, 1000000, 60, 1}
		}
	case "single", "cross":
	default:
		fmt.Fprintln(os.Stderr, "groupsbench: -mode is throttle, single or cross")
		os.Exit(2)
	}
	src, err := os.ReadFile(rulesPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "groupsbench:", err)
		os.Exit(2)
	}
	d, err := policy.Parse(rulesPath, src)
	if err != nil {
		fmt.Fprintln(os.Stderr, "groupsbench:", err)
		os.Exit(2)
	}
	group := func(s int) int {
		if s < split {
			return 0
		}
		return 1
	}
	home := group(slot.Of([]byte(d.Name)))
	// Values whose counter is in a wanted group: users always in the
	// domain's group; endpoints there (single) or in the other (cross).
	pick := func(key string, want, n int) []string {
		var out []string
		for i := 0; len(out) < n; i++ {
			v := key[:1] + strconv.Itoa(i)
			e := []policy.Entry{{Key: key, Value: v}}
			if group(slot.Of(d.Match(e).AppendKey(nil, e))) == want {
				out = append(out, v)
			}
		}
		return out
	}
	users := pick("user", home, 20000)
	ep := home
	if mode == "cross" {
		ep = 1 - home
	}
	endpoints := pick("endpoint", ep, 64)
	return func(i int) []any {
		return []any{"RL.CHECK", d.Name, "DESCRIPTOR", "user", users[i%len(users)], "DESCRIPTOR", "endpoint", endpoints[i%len(endpoints)]}
	}
}

// cpuSeconds sums utime and stime of the processes (clock ticks of 10 ms,
// Linux's USER_HZ).
func cpuSeconds(pids []string) float64 {
	var ticks int64
	for _, p := range pids {
		if p == "" {
			continue
		}
		b, err := os.ReadFile("/proc/" + p + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		for _, i := range []int{11, 12} { // utime, stime (fields 14, 15)
			n, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += n
		}
	}
	return float64(ticks) / 100
}
