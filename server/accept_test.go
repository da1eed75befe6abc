package server

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// failingListener fails Accept with EMFILE `failures` times, then reports
// itself closed.
type failingListener struct {
	net.Listener
	mu       sync.Mutex
	failures int
	calls    int
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.calls <= l.failures {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return nil, net.ErrClosed
}

// Issue 11 row 3: out of descriptors, the accept loop backs off between
// attempts (doubling from acceptBackoffMin) and logs one line per interval
// with the count, instead of spinning and logging every failure.
func TestAcceptBacksOffAndLogsOnce(t *testing.T) {
	var logs bytes.Buffer
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	s, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.closeStore()
	// Each failure also makes one attempt to refuse a client with the
	// reserved descriptor, which fails too: 10 calls are 5 rounds.
	ln := &failingListener{failures: 10}
	s.ln = ln
	start := time.Now()
	s.conns.Add(1)
	if err := s.acceptLoop(); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	// Five rounds pause at least 5+10+20+40+80 ms; a spinning loop makes
	// no pause at all.
	if minWait := 155 * time.Millisecond; elapsed < minWait {
		t.Fatalf("5 failed rounds took %v: no backoff (want >= %v)", elapsed, minWait)
	}
	if n := strings.Count(logs.String(), "accept failing"); n != 1 {
		t.Fatalf("%d log lines for 5 failures in one interval, want 1:\n%s", n, logs.String())
	}
}
