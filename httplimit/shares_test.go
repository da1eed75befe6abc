package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/resp"
)

// machineDoer is sluice reduced to its state machine, on a clock the test
// moves: each call is applied at *now.
type machineDoer struct {
	mu    sync.Mutex
	m     *machine.Machine
	now   *time.Time
	calls map[string]int
	fail  bool // RL.SHARE unavailable
	// charged: what RL.SHARE calls charged (USED) and RL.CHECK calls
	// admitted.
	charged int64
}

func (d *machineDoer) Do(ctx context.Context, args ...any) *redis.Cmd {
	d.mu.Lock()
	defer d.mu.Unlock()
	cmd := redis.NewCmd(ctx, args...)
	words := make([][]byte, len(args))
	for i, a := range args {
		words[i] = []byte(fmt.Sprint(a))
	}
	d.calls[string(words[0])]++
	if d.fail && string(words[0]) == "RL.SHARE" {
		cmd.SetErr(fmt.Errorf("dial tcp: i/o timeout"))
		return cmd
	}
	var w resp.Writer
	out := d.m.ApplyArgs(d.now.UnixNano(), words, &w)
	switch name := string(words[0]); {
	case name == "RL.SHARE" && out.Err == "":
		n, _ := strconv.ParseInt(string(words[5]), 10, 64)
		d.charged += n
	case name == "RL.CHECK" && out.Err == "" && !out.Limited:
		d.charged++
	}
	v, err := resp.DecodeReply(w.Buf)
	switch {
	case err != nil:
		cmd.SetErr(err)
	case v == nil:
		cmd.SetErr(redis.Nil)
	default:
		if e, ok := v.(error); ok {
			cmd.SetErr(e)
		} else {
			cmd.SetVal(v)
		}
	}
	return cmd
}

// Two Go services share a 100/s bucket through WithShares, deciding every
// request in process from buckets that refill continuously: together they
// admit at most 110 in any second (the burst of 10 besides the rate),
// use at least 90% of it, each gets a part, a report that does not land is
// charged at the next, and the counter ends holding what was admitted.
func TestSharesSplitABucketAndKeepItsBound(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	m := machine.New(machine.Options{})
	m.SetLevelAlone(machine.Level)
	d := &machineDoer{m: m, now: &now, calls: map[string]int{}}
	rules := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: r, unit: second, requests_per_unit: 100}\n"
	if err := d.Do(context.Background(), "RL.RULES", "LOAD", "d.yaml", rules).Err(); err != nil {
		t.Fatal(err)
	}
	var services []*Shares
	for i := range 2 {
		s, err := WithShares(Rules{Domain: "d", Descriptors: func(*http.Request, string) [][]Entry {
			return [][]Entry{{{Key: "k", Value: "v"}}}
		}}, ShareOptions{Holder: "go-" + strconv.Itoa(i), Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		services = append(services, s)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	perSecond := map[int64]int{}
	each := make([]int, len(services))
	start := now
	for ms := range 20_000 {
		now = start.Add(time.Duration(ms) * time.Millisecond)
		d.fail = ms >= 10_000 && ms < 11_000 // a second without sluice
		for i, s := range services {
			dec, err := s.Check(context.Background(), d, req, "")
			if err != nil {
				t.Fatal(err)
			}
			s.wg.Wait() // a report started by this request, done on this instant
			if !dec.Limited {
				perSecond[int64(ms/1000)]++
				each[i]++
			}
		}
	}
	total := 0
	for sec, n := range perSecond {
		total += n
		if n > 110 {
			t.Errorf("second %d admitted %d, past 100 + the burst of 10", sec, n)
		}
	}
	if total < 20*100*9/10 {
		t.Errorf("admitted %d in 20 s of a 100/s limit: under 90%%", total)
	}
	if each[0] < total/4 || each[1] < total/4 {
		t.Errorf("admitted %v: not split", each)
	}
	for _, s := range services {
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// Every unit admitted charged once: by a report (those of the second
	// without sluice at the next), or by the per-request check it was.
	if d.charged != int64(total) {
		t.Errorf("%d admitted, %d charged", total, d.charged)
	}
	if d.calls["RL.SHARE"] > 2*25+4 {
		t.Errorf("%d RL.SHARE calls for 2 services over 20 s: more than a report a second each", d.calls["RL.SHARE"])
	}
	t.Logf("admitted %d (%v), %d RL.SHARE calls, %d RL.CHECK calls", total, each, d.calls["RL.SHARE"], d.calls["RL.CHECK"])
}
