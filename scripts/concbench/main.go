// Command concbench measures concurrency-lease throughput: CONC.ACQUIRE +
// CONC.RELEASE pairs per second on sluice, the same pairs done the usual
// way on redis-server (EVALSHA of a sorted-set acquire script, then ZREM),
// and CL.THROTTLE on sluice through the same harness for scale.
//
// redis-benchmark sends one command shape per run, so it cannot measure an
// acquire followed by the release of the same id; this harness does, with
// pipelines: each round trip carries `pipeline` acquires on one key, then
// the matching releases. Every reply is checked, so a run that measured
// refusals or errors says so instead of reporting a fast wrong number.
//
// scripts/bench_conc.sh runs it against the servers scripts/bench.sh starts.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed acquire.lua
var acquireLua string

// config is what one run measures.
type config struct {
	sluice, redis string
	conns         int
	pipeline      int
	duration      time.Duration
	limit         int
	leaseSeconds  int
}

// result is one measured target.
type result struct {
	name      string
	commands  int64 // commands answered
	pairs     int64 // acquire+release pairs, 0 for single commands
	elapsed   time.Duration
	anomalies int64 // refusals, failed releases, wrong replies
}

func (r result) perSecond(n int64) float64 { return float64(n) / r.elapsed.Seconds() }

// round sends one pipeline for connection conn and returns the commands
// answered, the pairs completed and the anomalies seen.
type round func(ctx context.Context, pipe redis.Pipeliner, conn int, seq *int64) (cmds, pairs, anomalies int64, err error)

func main() {
	var cfg config
	flag.StringVar(&cfg.sluice, "sluice", "127.0.0.1:7481", "sluice address")
	flag.StringVar(&cfg.redis, "redis", "127.0.0.1:7482", "redis-server address")
	flag.IntVar(&cfg.conns, "conns", 50, "connections, one goroutine each")
	flag.IntVar(&cfg.pipeline, "pipeline", 16, "acquire+release pairs per round trip (CL.THROTTLE: twice as many commands)")
	flag.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long each target runs")
	flag.IntVar(&cfg.limit, "limit", 20, "lease limit per key (at least -pipeline, so no acquire is refused)")
	flag.IntVar(&cfg.leaseSeconds, "lease", 60, "lease seconds")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "concbench:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	if cfg.conns < 1 || cfg.pipeline < 1 || cfg.duration <= 0 || cfg.limit < cfg.pipeline || cfg.leaseSeconds < 1 {
		return errors.New("need conns, pipeline, duration, lease >= 1 and limit >= pipeline")
	}
	ctx := context.Background()
	sluice := client(cfg.sluice, cfg.conns)
	defer sluice.Close()
	rdb := client(cfg.redis, cfg.conns)
	defer rdb.Close()
	sha, err := rdb.ScriptLoad(ctx, acquireLua).Result()
	if err != nil {
		return fmt.Errorf("load the Lua script on %s: %w", cfg.redis, err)
	}

	limit, lease := strconv.Itoa(cfg.limit), strconv.Itoa(cfg.leaseSeconds)
	leaseMs := strconv.Itoa(cfg.leaseSeconds * 1000)
	pairs := func(acquire func(pipe redis.Pipeliner, key, id string) *redis.Cmd,
		release func(pipe redis.Pipeliner, key, id string) *redis.Cmd) round {
		return func(ctx context.Context, pipe redis.Pipeliner, conn int, seq *int64) (int64, int64, int64, error) {
			key := "bench:conc:" + strconv.Itoa(conn)
			acq := make([]*redis.Cmd, cfg.pipeline)
			rel := make([]*redis.Cmd, cfg.pipeline)
			ids := make([]string, cfg.pipeline)
			for i := range ids {
				*seq++
				ids[i] = strconv.FormatInt(*seq, 10)
				acq[i] = acquire(pipe, key, ids[i])
			}
			for i, id := range ids {
				rel[i] = release(pipe, key, id)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return 0, 0, 0, err
			}
			var bad int64
			for i := range ids {
				r, err := acq[i].Int64Slice()
				if err != nil || len(r) != 5 || r[0] != 0 {
					bad++
				}
				if n, err := rel[i].Int64(); err != nil || n != 1 {
					bad++
				}
			}
			return int64(2 * cfg.pipeline), int64(cfg.pipeline), bad, nil
		}
	}
	concRound := pairs(
		func(pipe redis.Pipeliner, key, id string) *redis.Cmd {
			return pipe.Do(ctx, "CONC.ACQUIRE", key, limit, lease, id)
		},
		func(pipe redis.Pipeliner, key, id string) *redis.Cmd {
			return pipe.Do(ctx, "CONC.RELEASE", key, id)
		})
	luaRound := pairs(
		func(pipe redis.Pipeliner, key, id string) *redis.Cmd {
			return pipe.Do(ctx, "EVALSHA", sha, 1, key, limit, leaseMs, id)
		},
		func(pipe redis.Pipeliner, key, id string) *redis.Cmd {
			return pipe.Do(ctx, "ZREM", key, id)
		})
	throttleRound := func(ctx context.Context, pipe redis.Pipeliner, conn int, _ *int64) (int64, int64, int64, error) {
		key := "bench:gcra:" + strconv.Itoa(conn)
		cmds := make([]*redis.Cmd, 2*cfg.pipeline)
		for i := range cmds {
			cmds[i] = pipe.Do(ctx, "CL.THROTTLE", key, 1_000_000, 1_000_000, 1)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, 0, 0, err
		}
		var bad int64
		for _, c := range cmds {
			if r, err := c.Int64Slice(); err != nil || len(r) != 5 {
				bad++
			}
		}
		return int64(len(cmds)), 0, bad, nil
	}

	var results []result
	for _, target := range []struct {
		name string
		c    *redis.Client
		r    round
	}{
		{"sluice CONC.ACQUIRE + CONC.RELEASE", sluice, concRound},
		{"redis-server EVALSHA sorted-set acquire + ZREM", rdb, luaRound},
		{"sluice CL.THROTTLE", sluice, throttleRound},
	} {
		r, err := measure(target.name, target.c, target.r, cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", target.name, err)
		}
		results = append(results, r)
	}
	report(results, cfg)
	return nil
}

func client(addr string, conns int) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, PoolSize: conns, MinIdleConns: conns,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
	})
}

// measure runs r on cfg.conns goroutines for cfg.duration.
func measure(name string, c *redis.Client, r round, cfg config) (result, error) {
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		return result{}, err
	}
	var (
		mu  sync.Mutex
		res = result{name: name}
		wg  sync.WaitGroup
		bad error
	)
	start := time.Now()
	deadline := start.Add(cfg.duration)
	for conn := range cfg.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pipe := c.Pipeline()
			var seq, cmds, pairs, anomalies int64
			var err error
			for time.Now().Before(deadline) {
				var n, p, a int64
				n, p, a, err = r(ctx, pipe, conn, &seq)
				if err != nil {
					break
				}
				cmds, pairs, anomalies = cmds+n, pairs+p, anomalies+a
			}
			mu.Lock()
			defer mu.Unlock()
			res.commands += cmds
			res.pairs += pairs
			res.anomalies += anomalies
			if err != nil && bad == nil {
				bad = err
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res, bad
}

func report(results []result, cfg config) {
	fmt.Printf("%d connections, pipelines of %d pairs (%d commands), %v per target, limit %d, lease %d s\n\n",
		cfg.conns, cfg.pipeline, 2*cfg.pipeline, cfg.duration, cfg.limit, cfg.leaseSeconds)
	fmt.Printf("%-48s %12s %12s %10s\n", "target", "pairs/s", "commands/s", "anomalies")
	for _, r := range results {
		pairs := "-"
		if r.pairs > 0 {
			pairs = fmt.Sprintf("%.0f", r.perSecond(r.pairs))
		}
		fmt.Printf("%-48s %12s %12.0f %10d\n", r.name, pairs, r.perSecond(r.commands), r.anomalies)
	}
	conc, lua, throttle := results[0], results[1], results[2]
	fmt.Println()
	fmt.Printf("CONC pairs / Redis+Lua pairs:             %.2fx\n", conc.perSecond(conc.pairs)/lua.perSecond(lua.pairs))
	fmt.Printf("CONC commands/s / CL.THROTTLE commands/s: %.2fx\n", conc.perSecond(conc.commands)/throttle.perSecond(throttle.commands))
}
