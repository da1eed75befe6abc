package httplimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A call that ignores its context still returns at the deadline, and its
// late answer reaches orphan.
func TestWithinTimesOut(t *testing.T) {
	unblock := make(chan struct{})
	late := make(chan Decision, 1)
	_, err := within(context.Background(), time.Millisecond, func(d Decision) { late <- d }, func(context.Context) (Decision, error) {
		<-unblock
		return Decision{lease: "x"}, nil
	})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v, want ErrTimeout", err)
	}
	close(unblock)
	if d := <-late; d.lease != "x" {
		t.Fatalf("orphan got %+v", d)
	}
}

// A client that went away is not a sluice failure.
func TestWithinClientGone(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	cancel()
	gaveUp := make(chan struct{})
	defer close(gaveUp)
	_, err := within(parent, time.Hour, nil, func(ctx context.Context) (Decision, error) {
		<-gaveUp // answer only after within returned
		return Decision{}, ctx.Err()
	})
	if !errors.Is(err, ErrClientGone) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v, want ErrClientGone", err)
	}
}

// An answer in time is returned as is.
func TestWithinAnswers(t *testing.T) {
	d, err := within(context.Background(), time.Hour, nil, func(context.Context) (Decision, error) {
		return Decision{Limit: 3}, nil
	})
	if err != nil || d.Limit != 3 {
		t.Fatalf("%+v, %v", d, err)
	}
}

// Error replies and unexpected replies prove sluice answered; the breaker
// counts only the rest.
func TestAnswered(t *testing.T) {
	if !answered(nil) || !answered(replyError("WRONGTYPE Operation against a key holding the wrong kind of value")) || !answered(ErrBadReply) {
		t.Fatal("an answer counted as a failure")
	}
	if answered(ErrTimeout) || answered(errors.New("dial tcp: connection refused")) {
		t.Fatal("a failure counted as an answer")
	}
}

// replyError is an error reply as go-redis reports it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// An immediate answer is never mistaken for a timeout (the deadline's
// cancellation once raced the answer in the select). Concurrent callers
// make the answer often arrive before its caller reaches the select.
func TestWithinNeverLosesAnAnswer(t *testing.T) {
	var wg sync.WaitGroup
	var lost atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				if _, err := within(context.Background(), time.Hour, nil, func(context.Context) (Decision, error) {
					return Decision{}, nil
				}); err != nil {
					lost.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if lost.Load() != 0 {
		t.Fatalf("%d of 16000 immediate answers were reported as failures", lost.Load())
	}
}
