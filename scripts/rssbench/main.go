// Command rssbench fills a sluice started with --maxmemory with one
// storing family until every command of a pipeline answers -OOM, waits
// for the process to settle, and prints its resident set against
// maxmemory (scripts/bench_rss.sh runs it per family, fresh process each).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7801", "sluice's address")
	family := flag.String("family", "gcra", "gcra, reserve, lease, exact, conc or big (refused 64 KB requests)")
	pid := flag.Int("pid", 0, "sluice's pid (its /proc/PID/status is read)")
	settle := flag.Duration("settle", 5*time.Second, "how long to wait after the fill before reading RSS")
	flag.Parse()
	c := redis.NewClient(&redis.Options{Addr: *addr, Protocol: 2})
	ctx := context.Background()
	big := strings.Repeat("x", 64<<10)
	n, oomRounds := 0, 0
	start := time.Now()
	for round := 0; round < 20000 && oomRounds < 3; round++ {
		p := c.Pipeline()
		for range 500 {
			k := strconv.Itoa(n)
			switch *family {
			case "gcra":
				p.Do(ctx, "CL.THROTTLE", "k"+k, 100, 1, 3600)
			case "reserve":
				p.Do(ctx, "RL.RESERVE", "bench", "r"+k, 3600, "DESCRIPTOR", "user", "u"+strconv.Itoa(n%1000))
			case "lease":
				p.Do(ctx, "RL.LEASE", "bench", "h"+k, 3600, "WANT", 1, "DESCRIPTOR", "user", "u"+strconv.Itoa(n%1000))
			case "exact":
				p.Do(ctx, "SW.CHECK", "log"+strconv.Itoa(n%2000), 100000, 3600, "EXACT")
			case "conc":
				p.Do(ctx, "CONC.ACQUIRE", "conc"+strconv.Itoa(n%2000), 10000, 3600, "r"+k)
			case "big":
				p.Do(ctx, "CL.THROTTLE", "big"+k+big, 100, 1, 3600)
			default:
				fmt.Fprintln(os.Stderr, "rssbench: unknown family", *family)
				os.Exit(2)
			}
			n++
		}
		cmds, _ := p.Exec(ctx)
		oom := 0
		for _, cmd := range cmds {
			if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "OOM") {
				oom++
			}
		}
		if oom == len(cmds) {
			oomRounds++
		}
		if *family == "big" && round >= 400 {
			break // 200,000 refused requests of 64 KB each: their garbage is what is measured
		}
	}
	took := time.Since(start)
	time.Sleep(*settle)
	info := c.Info(ctx, "memory").Val()
	field := func(name string) int64 {
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, name+":"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		return 0
	}
	rss := rssOf(*pid)
	maxmem := field("maxmemory")
	fmt.Printf("%-8s commands=%-8d fill=%-6s used_memory=%-6.1fMB rss=%-6.1fMB maxmemory=%.0fMB rss/maxmemory=%.2f\n",
		*family, n, took.Round(time.Second), mb(field("used_memory")), mb(rss), mb(maxmem), float64(rss)/float64(maxmem))
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

// rssOf reads VmRSS of pid, bytes.
func rssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
