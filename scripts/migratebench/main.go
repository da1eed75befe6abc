// Command migratebench measures a slot migration under load (issue #35):
// it fills -keys counters over the whole key space of a sharded cluster,
// starts callers on keys of the moving slots and on keys of the others,
// moves -from..-to from the group owning them to the group of -target, and
// reports keys and bytes moved per second, each chunk's TRYAGAIN window
// (the source's sluice_slot_migration_cutover_seconds), and the callers'
// latency before and during the move (a call's latency includes the
// client's retries of TRYAGAIN and its MOVED redirects).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/slot"
)

func main() {
	addrs := flag.String("addrs", "", "every member's client address, comma-separated")
	source := flag.String("source", "", "the source group leader's client address")
	sourceMetrics := flag.String("source-metrics", "", "the source group leader's --http-addr")
	target := flag.String("target", "", "a target group member's client address")
	nkeys := flag.Int("keys", 1_000_000, "counters to fill")
	from := flag.Int("from", 0, "first slot to move")
	to := flag.Int("to", 4095, "last slot to move")
	callers := flag.Int("callers", 8, "callers on each side (moving slots, other slots)")
	before := flag.Duration("before", 5*time.Second, "load before the move")
	after := flag.Duration("after", 5*time.Second, "load after the move, on the new layout")
	shared := flag.Bool("shared-client", false, "callers of moving and of other slots share one ClusterClient (each MOVED makes go-redis reload the slot map for all of them)")
	flag.Parse()
	ctx := context.Background()
	newClient := func() *redis.ClusterClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(*addrs, ","), MaxRedirects: 64,
			MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 4 * time.Millisecond, PoolSize: 64})
	}
	cc := newClient()
	defer cc.Close()
	clientOf := map[string]*redis.ClusterClient{"moving": cc, "other": cc}
	if !*shared {
		clientOf["other"] = newClient()
		defer clientOf["other"].Close()
	}

	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				base := next.Add(1000) - 1000
				if base >= int64(*nkeys) {
					return
				}
				p := cc.Pipeline()
				for i := base; i < min(base+1000, int64(*nkeys)); i++ {
					p.Do(ctx, "CL.THROTTLE", "k:"+strconv.FormatInt(i, 10), 100_000, 1, 86400)
				}
				if _, err := p.Exec(ctx); err != nil {
					log.Fatalf("fill: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("filled %d counters in %.1f s\n", *nkeys, time.Since(start).Seconds())

	var moving, other []string
	for i := 0; i < *nkeys && (len(moving) < 2000 || len(other) < 2000); i++ {
		k := "k:" + strconv.Itoa(i)
		if s := slot.Of([]byte(k)); s >= *from && s <= *to {
			moving = append(moving, k)
		} else {
			other = append(other, k)
		}
	}
	var phase atomic.Int32 // 0 before, 1 during, 2 after, 3 stopping
	var stop atomic.Bool
	var mu sync.Mutex
	lat := map[string][3][]time.Duration{}
	errs := map[string]int{}
	call := func(side string, keys []string, seed uint64) {
		defer wg.Done()
		cc := clientOf[side]
		r := rand.New(rand.NewPCG(seed, 7))
		var mine [3][]time.Duration
		var mineG1 [3][]time.Duration // other keys of the source group's staying slots
		n := 0
		for !stop.Load() {
			ph := phase.Load()
			k := keys[r.IntN(len(keys))]
			t0 := time.Now()
			err := cc.Do(ctx, "CL.THROTTLE", k, 100_000, 1, 86400).Err()
			if err != nil {
				n++
				continue
			}
			if ph < 3 {
				mine[ph] = append(mine[ph], time.Since(t0))
				if s := slot.Of([]byte(k)); side == "other" && s < 8192 {
					mineG1[ph] = append(mineG1[ph], time.Since(t0))
				}
			}
		}
		mu.Lock()
		for _, x := range []struct {
			side string
			d    [3][]time.Duration
		}{{side, mine}, {"source's other", mineG1}} {
			l := lat[x.side]
			for ph := range l {
				l[ph] = append(l[ph], x.d[ph]...)
			}
			lat[x.side] = l
		}
		errs[side] += n
		mu.Unlock()
	}
	for i := range *callers {
		wg.Add(2)
		go call("moving", moving, uint64(i))
		go call("other", other, uint64(1000+i))
	}
	time.Sleep(*before) // a length of load to compare against, not a wait for an outcome

	src := redis.NewClient(&redis.Options{Addr: *source, Protocol: 2})
	defer src.Close()
	tc := redis.NewClient(&redis.Options{Addr: *target})
	defer tc.Close()
	node, err := tc.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		log.Fatal(err)
	}
	phase.Store(1)
	t0 := time.Now()
	if err := src.Do(ctx, "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", *from, *to, "NODE", node).Err(); err != nil {
		log.Fatalf("MIGRATESLOTS: %v", err)
	}
	var job map[string]any
	for {
		v, err := src.Do(ctx, "CLUSTER", "GETSLOTMIGRATIONS").Slice()
		if err != nil {
			log.Fatal(err)
		}
		last := v[len(v)-1].([]any)
		job = map[string]any{}
		for i := 0; i+1 < len(last); i += 2 {
			job[fmt.Sprint(last[i])] = last[i+1]
		}
		if job["state"] != "running" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(t0)
	phase.Store(2)
	time.Sleep(*after) // a length of load to compare against
	phase.Store(3)
	stop.Store(true)
	wg.Wait()
	if job["state"] != "success" {
		log.Fatalf("the migration ended %v", job)
	}
	keys, _ := job["keys_moved"].(int64)
	bytes, _ := job["bytes_moved"].(int64)
	fmt.Printf("moved slots %d-%d: %d keys, %d bytes in %.2f s: %.0f keys/s, %.2f MB/s\n",
		*from, *to, keys, bytes, took.Seconds(), float64(keys)/took.Seconds(), float64(bytes)/took.Seconds()/1e6)
	if *sourceMetrics != "" {
		cutover(*sourceMetrics)
	}
	for _, side := range []string{"moving", "other", "source's other"} {
		for ph, name := range []string{"before", "during", "after"} {
			d := lat[side][ph]
			slices.Sort(d)
			if len(d) == 0 {
				continue
			}
			q := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000 }
			fmt.Printf("callers on %-14s slots %-6s the move: %7d calls  p50 %6.2f ms  p99 %7.2f ms  p99.9 %7.2f ms  max %7.2f ms\n",
				side, name, len(d), q(0.5), q(0.99), q(0.999), q(1))
		}
		if side != "source's other" {
			fmt.Printf("callers on %s slots: %d errors\n", side, errs[side])
		}
	}
}

// cutover prints the chunks' TRYAGAIN windows from the source's histogram
// (p50 and p99 as the upper bounds of their power-of-two buckets).
func cutover(addr string) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		log.Printf("metrics: %v", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	type bucket struct {
		le float64
		n  float64
	}
	var bs []bucket
	var sum, count float64
	for _, line := range strings.Split(string(body), "\n") {
		switch {
		case strings.HasPrefix(line, "sluice_slot_migration_cutover_seconds_bucket{le=\""):
			rest := strings.TrimPrefix(line, "sluice_slot_migration_cutover_seconds_bucket{le=\"")
			le, n, _ := strings.Cut(rest, "\"} ")
			l, _ := strconv.ParseFloat(le, 64)
			c, _ := strconv.ParseFloat(n, 64)
			bs = append(bs, bucket{l, c})
		case strings.HasPrefix(line, "sluice_slot_migration_cutover_seconds_sum "):
			sum, _ = strconv.ParseFloat(strings.Fields(line)[1], 64)
		case strings.HasPrefix(line, "sluice_slot_migration_cutover_seconds_count "):
			count, _ = strconv.ParseFloat(strings.Fields(line)[1], 64)
		}
	}
	if count == 0 {
		fmt.Fprintln(os.Stderr, "no cut-over measured")
		return
	}
	q := func(p float64) float64 {
		for _, b := range bs {
			if b.n >= p*count {
				return b.le * 1000
			}
		}
		return -1
	}
	fmt.Printf("TRYAGAIN window per chunk (%d chunks): mean %.2f ms, p50 ≤ %.2f ms, p99 ≤ %.2f ms\n",
		int(count), sum/count*1000, q(0.5), q(0.99))
}
