package tests

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Leadership moves every 150 ms while clients write: a reply is the truth.
// Every request is a CL.THROTTLE on a key of its own that admits one
// request, retried after every reply that says nothing was applied
// (MOVED, TRYAGAIN, CLUSTERDOWN) until it is answered; since a key admits
// once, a retry answered "limited" would mean an earlier "nothing applied"
// was false, and a key that exists after an error reply would mean the
// error hid an applied write.
func TestLeadershipTransfersAnswerExactly(t *testing.T) {
	cl := StartCluster(t, 3, nil)
	cl.Leader()
	clients := map[string]*redis.Client{}
	for _, s := range cl.Nodes {
		clients[s.Addr] = redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, ReadTimeout: 10 * time.Second})
		t.Cleanup(func() { clients[s.Addr].Close() })
	}
	stop := make(chan struct{})
	var transfers atomic.Int64
	var mover sync.WaitGroup
	mover.Add(1)
	go func() {
		defer mover.Done()
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, s := range cl.Nodes {
				if role(t, s) != "master" {
					continue
				}
				if clients[s.Addr].Do(ctx(t), "RAFT", "TRANSFER").Err() == nil {
					transfers.Add(1)
				}
				break
			}
		}
	}()

	type outcome struct {
		admitted, retried bool
		unknown           bool
	}
	const workers, perWorker = 8, 500
	results := make([][]outcome, workers)
	var notApplied, moved atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		results[w] = make([]outcome, perWorker)
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := cl.Nodes[w%3].Addr
			for i := range perWorker {
				key := fmt.Sprintf("{t%d}k%d", w, i)
				for attempt := 0; ; attempt++ {
					if attempt > 200 {
						t.Errorf("%s: no answer after 200 attempts", key)
						return
					}
					v, err := clients[addr].Do(ctx(t), "CL.THROTTLE", key, 0, 1, 3600).Slice()
					if err == nil {
						results[w][i].admitted = v[0].(int64) == 0
						results[w][i].retried = attempt > 0
						break
					}
					msg := err.Error()
					switch {
					case strings.HasPrefix(msg, "MOVED "):
						moved.Add(1)
						addr = msg[strings.LastIndexByte(msg, ' ')+1:]
					case strings.HasPrefix(msg, "TRYAGAIN"), strings.HasPrefix(msg, "CLUSTERDOWN"):
						notApplied.Add(1)
						time.Sleep(10 * time.Millisecond)
					case strings.Contains(msg, "outcome is unknown"):
						results[w][i].unknown = true
					default:
						t.Errorf("%s: %v", key, err)
						return
					}
					if results[w][i].unknown {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	mover.Wait()
	if transfers.Load() < 5 {
		t.Fatalf("only %d leadership transfers: the test moved too little", transfers.Load())
	}
	cl.SameDigests()
	lc := cl.Leader().Client()
	unknown := 0
	for w := range workers {
		for i, r := range results[w] {
			key := fmt.Sprintf("{t%d}k%d", w, i)
			switch {
			case r.unknown:
				unknown++
				if typ, _ := lc.Do(ctx(t), "TYPE", key).Text(); typ != "none" {
					t.Errorf("%s: answered 'outcome unknown' but it applied", key)
				}
			case !r.admitted:
				t.Errorf("%s: refused (retried %v): an earlier reply said nothing applied, yet it had", key, r.retried)
			}
		}
	}
	t.Logf("%d transfers, %d MOVED, %d TRYAGAIN/CLUSTERDOWN, %d unknown outcomes, %d requests",
		transfers.Load(), moved.Load(), notApplied.Load(), unknown, workers*perWorker)
}
