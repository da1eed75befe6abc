package server

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The poller polls before it parks while polling finds the next event in
// time, after a wait that returned few events; it stops after misses, but
// still tries one wait in 16 to notice when polling would pay again.
func TestPollerSpinsWhilePollingPays(t *testing.T) {
	p := &poller{spin: 30 * time.Microsecond}
	if !p.spinNow() {
		t.Fatal("a new poller does not poll")
	}
	for range 8 {
		p.spun(false)
	}
	polled := 0
	for range 32 {
		if p.spinNow() {
			polled++
		}
	}
	if polled != 2 {
		t.Fatalf("after misses, %d of 32 waits polled, want 2 (one in 16)", polled)
	}
	for range 8 {
		p.spun(true)
	}
	if !p.spinNow() {
		t.Fatal("after hits, the poller does not poll")
	}
	p.last = spinFewEvents + 1
	if p.spinNow() {
		t.Fatal("the poller polls after a wait that returned many events")
	}
	if (&poller{}).spinNow() {
		t.Fatal("a poller with no spin polls")
	}
}

// A wait that polls and finds nothing parks, and returns once an event
// arrives; an event that arrives while it polls is returned at once.
func TestPollerWaitPollsThenParks(t *testing.T) {
	for _, spin := range []time.Duration{0, 30 * time.Microsecond, time.Millisecond} {
		p, err := newPoller(spin)
		if err != nil {
			t.Fatal(err)
		}
		var fds [2]int
		if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		if err := p.watch(fds[0]); err != nil {
			t.Fatal(err)
		}
		for _, after := range []time.Duration{0, 100 * time.Microsecond, 20 * time.Millisecond} {
			go func() {
				time.Sleep(after)
				unix.Write(fds[1], []byte{1})
			}()
			events, err := p.wait(true)
			if err != nil || len(events) != 1 || int(events[0].Fd) != fds[0] {
				t.Fatalf("spin %v, event after %v: wait = %v, %v", spin, after, events, err)
			}
			var b [1]byte
			unix.Read(fds[0], b[:])
		}
		// A wake-up from another goroutine ends a parked wait too.
		go func() {
			time.Sleep(5 * time.Millisecond)
			p.wake()
		}()
		events, err := p.wait(true)
		if err != nil || len(events) != 1 || events[0].Fd != wakeTag {
			t.Fatalf("spin %v, wake-up: wait = %v, %v", spin, events, err)
		}
		p.drainWake()
		p.close()
		unix.Close(fds[0])
		unix.Close(fds[1])
	}
}
