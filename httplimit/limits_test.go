package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// recorder is a Doer that records the commands sent and answers reply.
type recorder struct {
	sent  [][]any
	reply any
	err   error
}

func (r *recorder) Do(ctx context.Context, args ...any) *redis.Cmd {
	r.sent = append(r.sent, args)
	cmd := redis.NewCmd(ctx, args...)
	if r.err != nil {
		cmd.SetErr(r.err)
	} else {
		cmd.SetVal(r.reply)
	}
	return cmd
}

// Each limit sends the command the README documents, with its options.
func TestLimitCommands(t *testing.T) {
	anchor := time.Unix(1706659200, 0)
	for _, tc := range []struct {
		limit  Limit
		want   string
		policy Policy
	}{
		{SlidingWindow{Limit: 5, Window: time.Minute}, "[SW.CHECK k 5 60 COST 1]", Policy{Quota: 5, Window: 60}},
		{SlidingWindow{Limit: 5, Window: time.Minute, Cost: 2, Exact: true}, "[SW.CHECK k 5 60 COST 2 EXACT]", Policy{Quota: 5, Window: 60}},
		{FixedWindow{Limit: 9, Window: time.Hour}, "[FW.CHECK k 9 3600 COST 1]", Policy{Quota: 9, Window: 3600}},
		// GCRA: what a key holds (16) per the time it takes to refill (32 s).
		{GCRA{Burst: 15, Count: 30, Period: time.Minute}, "[CL.THROTTLE k 15 30 60 1]", Policy{Quota: 16, Window: 32}},
		{Quota{Limit: 100, Period: "day"}, "[QUOTA.CHECK k 100 DAY COST 1]", Policy{Quota: 100, Window: 86400}},
		{Quota{Limit: 100, Period: "MONTH", Anchor: anchor, TZ: "Europe/Berlin", Cost: 3},
			"[QUOTA.CHECK k 100 MONTH ANCHOR 1706659200 TZ Europe/Berlin COST 3]", Policy{Quota: 100}},
	} {
		if err := tc.limit.Validate(); err != nil {
			t.Fatalf("%+v: %v", tc.limit, err)
		}
		rec := &recorder{reply: []any{int64(0), int64(5), int64(4), int64(-1), int64(12)}}
		d, err := tc.limit.Check(context.Background(), rec, nil, "k")
		if err != nil {
			t.Fatalf("%+v: %v", tc.limit, err)
		}
		if got := fmt.Sprint(rec.sent[0]); got != tc.want {
			t.Errorf("%T sent %s, want %s", tc.limit, got, tc.want)
		}
		want := Decision{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 12, Policy: tc.policy}
		if d != want {
			t.Errorf("%T decision %+v, want %+v", tc.limit, d, want)
		}
	}
}

// A concurrency lease is released under the id it was acquired with, and
// a refused acquire holds nothing to release.
func TestConcurrencyLease(t *testing.T) {
	l := Concurrency{Limit: 2, Lease: 30 * time.Second}
	rec := &recorder{reply: []any{int64(0), int64(2), int64(1), int64(-1), int64(30)}}
	d, err := l.Check(context.Background(), rec, nil, "k")
	if err != nil {
		t.Fatal(err)
	}
	acquire := rec.sent[0]
	if fmt.Sprint(acquire[:4]) != "[CONC.ACQUIRE k 2 30]" || d.lease == "" || acquire[4] != d.lease {
		t.Fatalf("sent %v, lease %q", acquire, d.lease)
	}
	rec.reply = int64(1)
	if err := l.Release(context.Background(), rec, "k", d); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rec.sent[1]); got != fmt.Sprint([]any{"CONC.RELEASE", "k", d.lease}) {
		t.Fatalf("release sent %s", got)
	}
	rec.reply = []any{int64(1), int64(2), int64(0), int64(5), int64(30)}
	refused, err := l.Check(context.Background(), rec, nil, "k")
	if err != nil || refused.lease != "" || !refused.Limited {
		t.Fatalf("refused acquire: %+v, %v", refused, err)
	}
	if other, _ := l.Check(context.Background(), &recorder{reply: rec.reply}, nil, "k"); other.lease == d.lease && d.lease != "" {
		t.Fatal("two acquires shared a request id")
	}
}

func TestDecodeRejectsWhatIsNotALimiterReply(t *testing.T) {
	for _, v := range []any{
		"OK",
		int64(1),
		[]any{int64(0), int64(1), int64(1), int64(-1)},
		[]any{int64(0), int64(1), "1", int64(-1), int64(0)},
		[]any{int64(2), int64(1), int64(1), int64(-1), int64(0)},
	} {
		if _, err := decode(v); !errors.Is(err, ErrBadReply) {
			t.Errorf("decode(%#v) = %v, want ErrBadReply", v, err)
		}
	}
	// RL.CHECK appends the rule's name and window: the five integers still decode.
	d, err := decode([]any{int64(1), int64(10), int64(0), int64(3), int64(60), "per-user", int64(60)})
	if err != nil || d != (Decision{Limited: true, Limit: 10, RetryAfter: 3, ResetAfter: 60}) {
		t.Fatalf("decode with a suffix: %+v, %v", d, err)
	}
}

func TestLimitValidate(t *testing.T) {
	for _, bad := range []Limit{
		SlidingWindow{Limit: 0, Window: time.Minute},
		SlidingWindow{Limit: 5, Window: 1500 * time.Millisecond},
		SlidingWindow{Limit: 5, Window: 0},
		SlidingWindow{Limit: 100001, Window: time.Minute, Exact: true},
		SlidingWindow{Limit: 5, Window: time.Minute, Cost: -1},
		FixedWindow{Limit: -1, Window: time.Minute},
		FixedWindow{Limit: 1, Window: -time.Second},
		GCRA{Burst: -1, Count: 1, Period: time.Second},
		GCRA{Count: 0, Period: time.Second},
		GCRA{Count: 1, Period: time.Millisecond},
		Quota{Limit: 1, Period: "FORTNIGHT"},
		Quota{Limit: -1, Period: "DAY"},
		Quota{Limit: 1, Period: "DAY", TZ: "Local"},
		Quota{Limit: 1, Period: "DAY", Anchor: time.Unix(-1, 0)},
		Concurrency{Limit: 0, Lease: time.Minute},
		Concurrency{Limit: 10001, Lease: time.Minute},
		Concurrency{Limit: 1, Lease: 0},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("%T%+v.Validate() = %v, want ErrInvalidLimit", bad, bad, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Client: &recorder{}, Key: RemoteAddr("ip:"), Limit: FixedWindow{Limit: 1, Window: time.Second}}
	if err := good.Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	d := good.withDefaults()
	if d.Name != DefaultName || d.Timeout != DefaultTimeout || d.FailClosedStatus != 503 || d.OnFailure != FailOpen ||
		d.Breaker != (BreakerConfig{Failures: 5, OpenFor: 5 * time.Second, Probes: 1}) {
		t.Fatalf("defaults: %+v", d)
	}
	for what, change := range map[string]func(*Config){
		"no client":       func(c *Config) { c.Client = nil },
		"no key":          func(c *Config) { c.Key = nil },
		"no limit":        func(c *Config) { c.Limit = nil },
		"bad limit":       func(c *Config) { c.Limit = FixedWindow{} },
		"negative":        func(c *Config) { c.Timeout = -time.Second },
		"failure mode":    func(c *Config) { c.OnFailure = 7 },
		"closed status":   func(c *Config) { c.FailClosedStatus = 200 },
		"jitter fraction": func(c *Config) { c.Jitter = 1500 * time.Millisecond },
		"name":            func(c *Config) { c.Name = "line\nbreak" },
		"open for":        func(c *Config) { c.Breaker.OpenFor = -time.Second },
	} {
		c := good
		change(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate() = %v, want ErrConfig", what, err)
		}
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New() = %v, want ErrConfig", what, err)
		}
	}
}

func TestRemoteAddr(t *testing.T) {
	key := RemoteAddr("ip:")
	for addr, want := range map[string]string{
		"192.0.2.1:1234": "ip:192.0.2.1",
		"[::1]:80":       "ip:::1",
		"pipe":           "ip:pipe",
		"":               "",
	} {
		if got := key(&http.Request{RemoteAddr: addr}); got != want {
			t.Errorf("RemoteAddr key of %q = %q, want %q", addr, got, want)
		}
	}
}
