package tests

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A TLS client that never stops pipelining must not starve the other
// clients of its event loop. The loop serves a plain connection one read
// per wake-up; a TLS connection may hold decrypted requests its socket no
// longer signals, so it is revisited — after the other ready connections,
// not by reading it until it runs dry, which with a client that writes
// faster than the server answers is never.
func TestTLSPipelinerCannotStarveItsLoop(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	s := StartServer(t, "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--io-threads", "1")
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
	other := s.Client(func(o *redis.Options) {
		o.TLSConfig = cfg
		o.ReadTimeout, o.WriteTimeout, o.MaxRetries = 20*time.Second, 20*time.Second, -1
	})
	if err := other.Ping(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}

	raw, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	flood := tls.Client(raw, cfg)
	if err := flood.Handshake(); err != nil {
		t.Fatal(err)
	}
	// Replies are read (so the flood is never closed for its output) and
	// counted, so the test knows the server is busy with the flood.
	var answered atomic.Int64
	go func() {
		br := bufio.NewReader(flood)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "+PONG\r\n" {
				answered.Add(1)
			}
		}
	}()
	stop := make(chan struct{})
	flooded := make(chan error, 1)
	go func() {
		chunk := []byte(strings.Repeat("*1\r\n$4\r\nPING\r\n", 4096))
		for {
			select {
			case <-stop:
				flooded <- nil
				return
			default:
			}
			if _, err := flood.Write(chunk); err != nil {
				flooded <- err
				return
			}
		}
	}()

	// The flood is under way once the server answered some of it.
	eventually(t, "the flood answered", func() bool { return answered.Load() > 20_000 })
	for range 3 {
		start := time.Now()
		if err := other.Ping(ctx(t)).Err(); err != nil {
			t.Fatalf("another client on the loop, during the flood: %v (after %v)", err, time.Since(start))
		}
	}
	close(stop)
	if err := <-flooded; err != nil && err != io.EOF {
		t.Fatalf("the flood ended with %v before the other client was answered", err)
	}
}
