package tests

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Issue #58: Redis 8.8's GCRA through go-redis — the documented reply,
// Redis' errors, COMMAND's key spec — and through go-redis' ClusterClient
// on a sharded cluster, which routes it by that key spec to the key's
// group.
func TestGCRAThroughGoRedis(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	ints := func(args ...any) []int64 {
		t.Helper()
		v, err := c.Do(ctx(t), args...).Slice()
		if err != nil || len(v) != 5 {
			t.Fatalf("%v: %v %v", args, v, err)
		}
		out := make([]int64, 5)
		for i := range v {
			out[i] = v[i].(int64)
		}
		return out
	}
	if got := fmt.Sprint(ints("GCRA", "k", 10, 5, 1)); got != "[0 11 10 -1 1]" {
		t.Fatalf("a first call: %s", got)
	}
	if got := fmt.Sprint(ints("GCRA", "k", 10, 5, 1, "TOKENS", 10)); got != "[0 11 0 -1 3]" {
		t.Fatalf("the rest of the burst: %s", got)
	}
	if got := fmt.Sprint(ints("GCRA", "k", 10, 5, 1)); got != "[1 11 0 1 3]" {
		t.Fatalf("past the burst: %s", got)
	}
	for _, bad := range []struct {
		args []any
		want string
	}{
		{[]any{"GCRA", "k", 10, 0, 1}, "ERR value is out of range, value must between 1 and 9223372036854775807"},
		{[]any{"GCRA", "k", 10, 5, 0.0}, "ERR period must be > 0 and < 1e12"},
		{[]any{"GCRA", "k", -1, 5, 1}, "ERR value is out of range, must be positive"},
		{[]any{"GCRA", "k", 10, 5, 1, "TOKENS"}, "ERR Missing TOKENS value"},
	} {
		if err := c.Do(ctx(t), bad.args...).Err(); err == nil || err.Error() != bad.want {
			t.Errorf("%v: %v, want %q", bad.args, err, bad.want)
		}
	}
	info, err := c.Do(ctx(t), "COMMAND", "INFO", "gcra").Slice()
	if err != nil || len(info) != 1 {
		t.Fatalf("COMMAND INFO gcra: %v %v", info, err)
	}
	if d, ok := info[0].([]any); !ok || len(d) < 6 || d[0] != "gcra" || d[1] != int64(-5) || d[3] != int64(1) || d[4] != int64(1) || d[5] != int64(1) {
		t.Fatalf("COMMAND INFO gcra: %v", info[0])
	}

	sc := StartShardedCluster(t, 1, [][]string{{"0-8191"}, {"8192-16383"}})
	for _, g := range sc.Groups {
		awaitApplyLevel(t, g...) // GCRA answers from level 1
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: sc.Addrs()})
	t.Cleanup(func() { cc.Close() })
	// Each group takes its slots from the map once it leads (TRYAGAIN
	// until then): a key of each group's, answered.
	for _, key := range []string{"{a}ready", "{b}ready"} {
		eventually(t, "the groups serve their slots", func() bool { return cc.Do(ctx(t), "GCRA", key, 1, 1, 60).Err() == nil })
	}
	for i := range 40 {
		key := fmt.Sprintf("user:%d", i)
		v, err := cc.Do(ctx(t), "GCRA", key, 1, 1, 60).Slice()
		if err != nil || fmt.Sprint(v) != "[0 2 1 -1 60]" {
			t.Fatalf("GCRA %s on a sharded cluster: %v %v", key, v, err)
		}
	}
}
