// Command reservebench measures what holding a reservation costs: RL.RESERVE
// followed by the RL.SETTLE of the same id, against one RL.CHECK on the
// same rules, through go-redis pipelines (each round trip carries
// `pipeline` reserves, then the matching settles; a check run, `pipeline`
// checks). redis-benchmark sends one command shape per run and cannot
// settle the id it reserved. Every reply is checked, so a run that measured
// refusals or errors says so instead of reporting a fast wrong number.
//
// scripts/bench_reserve.sh runs it in alternating pairs against one server.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "sluice's address")
	mode := flag.String("mode", "check", "check (one RL.CHECK) or pair (RL.RESERVE + RL.SETTLE)")
	conns := flag.Int("conns", 50, "connections")
	pipeline := flag.Int("pipeline", 1, "commands per round trip")
	duration := flag.Duration("duration", 5*time.Second, "how long to run")
	flag.Parse()
	if *mode != "check" && *mode != "pair" {
		fmt.Fprintln(os.Stderr, "reservebench: -mode is check or pair")
		os.Exit(2)
	}
	c := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: *conns, MaxRetries: -1})
	defer c.Close()
	var ops, anomalies atomic.Int64
	lat := make([][]time.Duration, *conns)
	deadline := time.Now().Add(*duration)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				p := c.Pipeline()
				var cmds []*redis.Cmd
				for j := range *pipeline {
					user := "u:" + strconv.Itoa((w*7919+i*31+j)%100000)
					if *mode == "check" {
						cmds = append(cmds, p.Do(ctx, "RL.CHECK", "bench", "COST", 3, "DESCRIPTOR", "user", user, "DESCRIPTOR", "endpoint", "/e"))
					} else {
						id := strconv.Itoa(w) + "-" + strconv.Itoa(i) + "-" + strconv.Itoa(j)
						cmds = append(cmds, p.Do(ctx, "RL.RESERVE", "bench", id, 60, "COST", 3, "DESCRIPTOR", "user", user, "DESCRIPTOR", "endpoint", "/e"))
					}
				}
				if _, err := p.Exec(ctx); err != nil {
					anomalies.Add(1)
					continue
				}
				if *mode == "pair" {
					p = c.Pipeline()
					settles := make([]*redis.Cmd, 0, *pipeline)
					for j := range *pipeline {
						settles = append(settles, p.Do(ctx, "RL.SETTLE", "bench", strconv.Itoa(w)+"-"+strconv.Itoa(i)+"-"+strconv.Itoa(j), 1))
					}
					if _, err := p.Exec(ctx); err != nil {
						anomalies.Add(1)
						continue
					}
					for _, s := range settles {
						if v, err := s.Slice(); err != nil || len(v) != 2 {
							anomalies.Add(1)
						}
					}
				}
				for _, cmd := range cmds {
					if v, err := cmd.Slice(); err != nil || len(v) != 7 || v[0] != int64(0) {
						anomalies.Add(1)
					}
				}
				lat[w] = append(lat[w], time.Since(t0))
				ops.Add(int64(*pipeline))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(q float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(q*float64(len(all))))]
	}
	fmt.Printf("%s P=%d: %.0f decisions/s, round trip p50 %v p99 %v, %d anomalies\n",
		*mode, *pipeline, float64(ops.Load())/elapsed.Seconds(), pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), anomalies.Load())
}
