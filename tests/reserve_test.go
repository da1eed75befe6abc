package tests

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const reserveRules = `domain: llm
descriptors:
  - key: tenant
    rate_limit:
      name: tokens-per-day
      unit: day
      requests_per_unit: 100000
      sluice: {algorithm: quota}
  - key: user
    rate_limit: {name: per-user, unit: minute, requests_per_unit: 1000}
`

// checkInts are the five integers of an RL.CHECK-shaped reply.
func checkInts(t *testing.T, c redis.UniversalClient, args ...any) []int64 {
	t.Helper()
	v, err := c.Do(ctx(t), args...).Slice()
	if err != nil || len(v) != 7 {
		t.Fatalf("%v: %v %v", args, v, err)
	}
	out := make([]int64, 5)
	for i := range out {
		out[i] = v[i].(int64)
	}
	return out
}

// settleRow is one limit of RL.SETTLE's reply.
type settleRow struct {
	name                                string
	reserved, actual, refunded, charged int64
}

func settle(t *testing.T, c redis.UniversalClient, args ...any) []settleRow {
	t.Helper()
	v, err := c.Do(ctx(t), args...).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	var rows []settleRow
	for _, r := range v.([]any) {
		f := r.([]any)
		rows = append(rows, settleRow{f[0].(string), f[1].(int64), f[2].(int64), f[3].(int64), f[4].(int64)})
	}
	if rows == nil {
		rows = []settleRow{}
	}
	return rows
}

// Reserve, retry, settle below and above, cancel and bad input through
// go-redis and redis-cli; expiry at the log's instant (the debug clock);
// a held reservation survives a restart.
func TestReserveSettleThroughClients(t *testing.T) {
	s := StartServer(t, "--rules", writeRules(t, "llm.yaml", reserveRules))
	c := s.Client()
	setClock(t, c, future)
	remaining := func() int64 {
		return checkInts(t, c, "RL.CHECK", "llm", "COST", 0, "DESCRIPTOR", "tenant", "acme")[2]
	}
	v, err := c.Do(ctx(t), "RL.RESERVE", "llm", "req-1", 120, "COST", 2000, "DESCRIPTOR", "tenant", "acme").Slice()
	if err != nil || v[0] != int64(0) || v[2] != int64(98000) || v[5] != "tokens-per-day" {
		t.Fatalf("reserve: %v %v", v, err)
	}
	again, _ := c.Do(ctx(t), "RL.RESERVE", "llm", "req-1", 120, "COST", 2000, "DESCRIPTOR", "tenant", "acme").Slice()
	if fmt.Sprint(again) != fmt.Sprint(v) || remaining() != 98000 {
		t.Fatalf("a retried reserve answers %v (first %v) and leaves %d", again, v, remaining())
	}
	rows := settle(t, c, "RL.SETTLE", "llm", "req-1", 1312)
	if len(rows) != 1 || rows[0] != (settleRow{"tokens-per-day", 2000, 1312, 688, 0}) || remaining() != 100000-1312 {
		t.Fatalf("settle: %+v, remaining %d", rows, remaining())
	}
	if rows := settle(t, c, "RL.SETTLE", "llm", "req-1", 1312); rows != nil {
		t.Fatalf("a second settle: %+v", rows)
	}
	// A late copy of the settled reserve is refused and charges nothing.
	if err := c.Do(ctx(t), "RL.RESERVE", "llm", "req-1", 120, "COST", 2000, "DESCRIPTOR", "tenant", "acme").Err(); err == nil ||
		!strings.HasPrefix(err.Error(), "ERR reservation req-1 was settled or cancelled") || remaining() != 100000-1312 {
		t.Fatalf("a reserve of a settled id: %v, remaining %d", err, remaining())
	}
	// Above the reservation: charged in full.
	c.Do(ctx(t), "RL.RESERVE", "llm", "req-2", 120, "COST", 100, "DESCRIPTOR", "tenant", "acme")
	if rows := settle(t, c, "RL.SETTLE", "llm", "req-2", 600); rows[0].charged != 500 || remaining() != 100000-1312-600 {
		t.Fatalf("settle above: %+v, remaining %d", rows, remaining())
	}
	// redis-cli, and cancel.
	if out := redisCLI(t, s.Addr, "RL.RESERVE", "llm", "req-3", "60", "COST", "50", "DESCRIPTOR", "tenant", "acme", "DESCRIPTOR", "user", "u1"); !strings.HasPrefix(out, "0\n") {
		t.Fatalf("redis-cli RL.RESERVE: %q", out)
	}
	if out := redisCLI(t, s.Addr, "RL.CANCEL", "llm", "req-3"); out != "1) 1) \"llm.tenant\"\n   2) (integer) 50\n   3) (integer) 0\n   4) (integer) 50\n   5) (integer) 0\n2) 1) \"per-user\"\n   2) (integer) 50\n   3) (integer) 0\n   4) (integer) 50\n   5) (integer) 0\n" &&
		!strings.Contains(out, "tokens-per-day\n50\n0\n50\n0\nper-user\n50\n0\n50\n0") {
		t.Fatalf("redis-cli RL.CANCEL: %q", out)
	}
	// Bad input: a clear error, nothing charged.
	before := remaining()
	for _, bad := range [][]any{
		{"RL.RESERVE", "llm", "r", 0, "DESCRIPTOR", "tenant", "acme"},
		{"RL.RESERVE", "llm", strings.Repeat("i", 257), 10, "DESCRIPTOR", "tenant", "acme"},
		{"RL.RESERVE", "llm", "r", 10, "COST", -5, "DESCRIPTOR", "tenant", "acme"},
		{"RL.RESERVE", "llm", "r", 10, "COST", "9223372036854775808", "DESCRIPTOR", "tenant", "acme"},
		{"RL.SETTLE", "llm", "r", -1},
		{"RL.SETTLE", "llm", "r", "x"},
	} {
		if err := c.Do(ctx(t), bad...).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR ") || strings.Contains(err.Error(), "internal") {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if remaining() != before {
		t.Fatalf("bad input charged: %d, was %d", remaining(), before)
	}
	// Expiry at the log's instant: the charge stays, the id is gone.
	c.Do(ctx(t), "RL.RESERVE", "llm", "ttl", 10, "COST", 70, "DESCRIPTOR", "tenant", "acme")
	advance(t, c, 10*time.Second-time.Nanosecond)
	if info := c.Info(ctx(t), "stats").Val(); !containsLine(info, "reservations_held:1") {
		t.Fatalf("the reservation is gone before its ttl:\n%s", info)
	}
	if n, _ := c.Do(ctx(t), "EXISTS", "rl:{llm}#reservation:ttl").Int(); n != 0 {
		t.Fatal("a reservation's record is a key")
	}
	advance(t, c, time.Nanosecond)
	if rows := settle(t, c, "RL.SETTLE", "llm", "ttl", 0); rows != nil || remaining() != before-70 {
		t.Fatalf("after its ttl: %+v, remaining %d (was %d)", rows, remaining(), before)
	}
	// A held reservation survives a restart (the shutdown snapshot).
	c.Do(ctx(t), "RL.RESERVE", "llm", "kept", 3600, "COST", 30, "DESCRIPTOR", "tenant", "acme")
	s.Stop()
	s.Start()
	c = s.Client()
	if rows := settle(t, c, "RL.CANCEL", "llm", "kept"); len(rows) != 1 || rows[0].refunded != 30 {
		t.Fatalf("after a restart: %+v", rows)
	}
	info, _ := c.Info(ctx(t), "stats").Result()
	if !strings.Contains(info, "reservations_held:0\r\n") || !strings.Contains(info, "reservations_cancelled:1\r\n") {
		t.Fatalf("INFO stats:\n%s", info)
	}
}

// 50 callers reserve and settle on one shared quota: the units settled
// never pass the limit, and the quota's count is exactly what was settled
// (every refund exact, none lost, none doubled).
func TestReserveSettleConcurrentExact(t *testing.T) {
	const limit = 20000
	rules := fmt.Sprintf("domain: llm\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: day, requests_per_unit: %d, sluice: {algorithm: quota}}\n", limit)
	s := StartServer(t, "--rules", writeRules(t, "llm.yaml", rules))
	c := s.Client(func(o *redis.Options) { o.PoolSize = 64 })
	setClock(t, c, future)
	var settled, admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for w := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range 40 {
				id := fmt.Sprintf("w%d-%d", w, i)
				est := 1 + rng.Int64N(40)
				v, err := c.Do(ctx(t), "RL.RESERVE", "llm", id, 60, "COST", est, "DESCRIPTOR", "tenant", "acme").Slice()
				if err != nil || len(v) != 7 {
					t.Errorf("reserve: %v %v", v, err)
					return
				}
				if v[0] == int64(1) {
					refused.Add(1)
					continue
				}
				admitted.Add(1)
				actual := rng.Int64N(est + 1)
				if err := c.Do(ctx(t), "RL.SETTLE", "llm", id, actual).Err(); err != nil {
					t.Errorf("settle: %v", err)
					return
				}
				settled.Add(actual)
			}
		}()
	}
	wg.Wait()
	used := checkInts(t, c, "RL.CHECK", "llm", "COST", 0, "DESCRIPTOR", "tenant", "acme")
	if got := limit - used[2]; got != settled.Load() || got > limit {
		t.Fatalf("the quota counts %d used; the callers settled %d (limit %d; %d admitted, %d refused)",
			got, settled.Load(), limit, admitted.Load(), refused.Load())
	}
	if admitted.Load() == 0 {
		t.Fatal("nothing admitted")
	}
}

// A 3-node cluster: the leader is killed between a reserve and its settle;
// the settle on the new leader finds the reservation, exactly once.
func TestReservationSurvivesFailover(t *testing.T) {
	cl := StartCluster(t, 3, nil, "--rules", writeRules(t, "llm.yaml", reserveRules))
	leader := cl.Leader()
	c := leader.Client()
	eventually(t, "the leader applied its rules", func() bool {
		v, err := c.Do(ctx(t), "RL.RULES", "LIST", "llm").Slice()
		return err == nil && len(v) == 2
	})
	if err := c.Do(ctx(t), "RL.RESERVE", "llm", "fo", 600, "COST", 500, "DESCRIPTOR", "tenant", "acme").Err(); err != nil {
		t.Fatal(err)
	}
	cc := cl.Client()
	leader.Kill()
	next := cl.Leader()
	rows := settle(t, next.Client(), "RL.SETTLE", "llm", "fo", 123)
	if len(rows) != 1 || rows[0] != (settleRow{"tokens-per-day", 500, 123, 377, 0}) {
		t.Fatalf("settle after failover: %+v", rows)
	}
	if rows := settle(t, cc, "RL.SETTLE", "llm", "fo", 123); rows != nil {
		t.Fatalf("a second settle after failover: %+v", rows)
	}
	// The settled id is kept through the log: a late copy of the reserve,
	// on the new leader, is refused.
	if err := cc.Do(ctx(t), "RL.RESERVE", "llm", "fo", 600, "COST", 500, "DESCRIPTOR", "tenant", "acme").Err(); err == nil ||
		!strings.HasPrefix(err.Error(), "ERR reservation fo was settled or cancelled") {
		t.Fatalf("a reserve of the settled id after failover: %v", err)
	}
	if v := checkInts(t, cc, "RL.CHECK", "llm", "COST", 0, "DESCRIPTOR", "tenant", "acme"); v[2] != 100000-123 {
		t.Fatalf("after failover and settle: %v", v)
	}
}

// Issue #43: a settle so far above its reservation that the GCRA instant
// would pass the int64 range saturates — the key is refused until the far
// future — and never charges nothing.
func TestGCRASettlePastTheRangeSaturates(t *testing.T) {
	rules := writeRules(t, "llm.yaml", "domain: llm\ndescriptors:\n  - key: tenant\n    rate_limit:\n      unit: minute\n      requests_per_unit: 10\n      sluice: {algorithm: gcra}\n")
	c := StartServer(t, "--rules", rules).Client()
	if err := c.Do(ctx(t), "RL.RESERVE", "llm", "big", 60, "DESCRIPTOR", "tenant", "acme").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx(t), "RL.SETTLE", "llm", "big", 2_000_000_000).Err(); err != nil {
		t.Fatalf("RL.SETTLE 2e9: %v", err)
	}
	r, err := c.Do(ctx(t), "RL.CHECK", "llm", "DESCRIPTOR", "tenant", "acme").Slice()
	if err != nil || r[0].(int64) != 1 {
		t.Fatalf("RL.CHECK after a 2e9 settle: %v %v (want refused)", r, err)
	}
}
