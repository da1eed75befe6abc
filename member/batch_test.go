package member

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/machine"
)

// Calls forwarded at once go in batches (fewer than the calls), each
// answered with its own outcome; a member that does not lead says who
// does, per call; a caller that gives up before its call is sent is told
// it was never sent.
func TestDecideGoesInBatches(t *testing.T) {
	var decided atomic.Int64
	release := make(chan struct{})
	mux, ln := listenMembers(t, "g1")
	var batches atomic.Int64
	srv := mustServe(t, ln, ServerConfig{Group: "g1", Decide: counted(&batches, eachCall(func(cmd [][]byte) (machine.Outcome, string, error) {
		decided.Add(1)
		switch string(cmd[1]) {
		case "follower":
			return machine.Outcome{}, "127.0.0.1:9", ErrNotLeader
		case "slow":
			<-release
		}
		n, _ := strconv.Atoi(string(cmd[2]))
		return machine.Outcome{Limited: n%2 == 1, Statuses: []machine.RLSStatus{{Code: 1, Remaining: int64(n)}}}, "", nil
	}))})
	defer srv.Stop()
	c := NewClient(ClientConfig{})
	defer c.Close()
	to := Addr{Port: mux.Addr().String(), Group: "g1"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const calls = 400
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := c.Decide(ctx, to, [][]byte{[]byte("RL.SHOULDRATELIMIT"), []byte("d"), []byte(strconv.Itoa(i))})
			if err != nil || out.Limited != (i%2 == 1) || len(out.Statuses) != 1 || out.Statuses[0].Remaining != int64(i) {
				errs <- fmt.Errorf("call %d: %+v %v", i, out, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if decided.Load() != calls || batches.Load() >= calls {
		t.Fatalf("%d decided of %d, in %d batches", decided.Load(), calls, batches.Load())
	}
	_, err := c.Decide(ctx, to, [][]byte{[]byte("RL.SHOULDRATELIMIT"), []byte("follower"), []byte("0")})
	if leader, ok := LeaderOf(err); !ok || leader != "127.0.0.1:9" || !NothingApplied(err) {
		t.Fatalf("a call at a follower: %v", err)
	}
	// Every batch in flight held by a slow call (one at a time, so each
	// is a batch of its own): a call behind them whose deadline passes is
	// never sent.
	for k := range int64(batchesInFlight) {
		go c.Decide(ctx, to, [][]byte{[]byte("RL.SHOULDRATELIMIT"), []byte("slow"), []byte("0")})
		for decided.Load() < calls+2+k {
			time.Sleep(time.Millisecond)
		}
	}
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	before := decided.Load()
	if _, err := c.Decide(short, to, [][]byte{[]byte("RL.SHOULDRATELIMIT"), []byte("late"), []byte("0")}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("a call whose deadline passed in the queue: %v", err)
	}
	close(release)
	if _, err := c.Decide(ctx, to, [][]byte{[]byte("RL.SHOULDRATELIMIT"), []byte("after"), []byte("2")}); err != nil {
		t.Fatal(err)
	}
	if decided.Load() != before+1 {
		t.Fatalf("%d decided since, want only the call after: the one given up in the queue was sent", decided.Load()-before)
	}
}

// counted counts the batches decide is given.
func counted(n *atomic.Int64, decide DecideFunc) DecideFunc {
	return func(ctx context.Context, cmds [][][]byte) ([]machine.Outcome, string, error) {
		n.Add(1)
		return decide(ctx, cmds)
	}
}

// A batch lingers to gather calls only while others are in flight, and
// never longer than a bounded part of a round trip: a lone call behind
// slow batches is answered while they still wait.
func TestALingeringBatchStillGoes(t *testing.T) {
	release := make(chan struct{})
	var slow atomic.Int64
	mux, ln := listenMembers(t, "g1")
	srv := mustServe(t, ln, ServerConfig{Group: "g1", Decide: eachCall(func(cmd [][]byte) (machine.Outcome, string, error) {
		if string(cmd[1]) == "slow" {
			slow.Add(1)
			<-release
		}
		return machine.Outcome{}, "", nil
	})})
	defer srv.Stop()
	c := NewClient(ClientConfig{})
	defer c.Close()
	defer close(release) // before the client waits for its batches
	to := Addr{Port: mux.Addr().String(), Group: "g1"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call := func(ctx context.Context, what string) error {
		_, err := c.Decide(ctx, to, [][]byte{[]byte("RL.SHOULDRATELIMIT"), []byte(what), []byte("0")})
		return err
	}
	for range 20 { // round trips to linger by
		if err := call(ctx, "quick"); err != nil {
			t.Fatal(err)
		}
	}
	// Each slow call its own batch; the last ones linger (steadyInFlight
	// are in flight) and must still go.
	giveUp := time.Now().Add(5 * time.Second)
	for k := range int64(steadyInFlight + 2) {
		go call(ctx, "slow")
		for slow.Load() < k+1 {
			if time.Now().After(giveUp) {
				t.Fatalf("slow call %d behind %d in flight was never sent", k+1, k)
			}
			time.Sleep(time.Millisecond)
		}
	}
	lone, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	if err := call(lone, "lone"); err != nil {
		t.Fatalf("a lone call behind slow batches: %v", err)
	}
}
