package tests

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A TLS client that stops reading its replies leaves the server's writes to
// it waiting for a full socket. Neither what that client sends next nor a
// CLIENT KILL of it may then stall the event loop it shares with other
// clients: TLS answers a bad record with an alert and a close with
// close_notify, and those writes must not wait behind the queued replies.
// (The bad record stalled the loop before tlsWire; the kill did not, as
// crypto/tls skipped close_notify while the writer goroutine's write was
// in flight — now the kill's close_notify goes through the output.)
func TestTLSStalledClientCannotStallTheLoop(t *testing.T) {
	s, cfg, other := tlsOneLoop(t)

	for _, how := range []string{"bad record", "client kill"} {
		t.Run(how, func(t *testing.T) {
			raw, stalled := dialTLS(t, s.Addr, cfg)
			// Replies far larger than both sockets' buffers, never read
			// (ECHO: cheap to answer, so the loop is soon free again).
			before, _ := strconv.ParseInt(infoField(t, other, "stats", "total_net_output_bytes"), 10, 64)
			echo := "*2\r\n$4\r\nECHO\r\n$1048576\r\n" + strings.Repeat("x", 1<<20) + "\r\n"
			if _, err := stalled.Write([]byte(strings.Repeat(echo, 32))); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the stalled client's replies produced", func() bool {
				n, _ := strconv.ParseInt(infoField(t, other, "stats", "total_net_output_bytes"), 10, 64)
				return n-before > 30<<20
			})
			// ... and waiting for the client, not sent: the writer goroutine
			// is blocked on the full socket.
			if omem := clientField(t, other, raw.LocalAddr().String(), "omem"); omem < 1<<20 {
				t.Fatalf("the stalled client's unsent output is %d bytes: its socket is not full", omem)
			}
			switch how {
			case "bad record":
				// Application data the server cannot decrypt: it answers with
				// an alert.
				junk := append([]byte{23, 3, 3, 0, 32}, make([]byte, 32)...)
				if _, err := raw.Write(junk); err != nil {
					t.Fatal(err)
				}
			case "client kill":
				if n, err := other.ClientKillByFilter(ctx(t), "ADDR", raw.LocalAddr().String()).Result(); err != nil || n != 1 {
					t.Fatalf("CLIENT KILL ADDR = %d, %v", n, err)
				}
			}
			start := time.Now()
			if err := other.Ping(ctx(t)).Err(); err != nil {
				t.Fatalf("another client on the loop, after the stalled client's %s: %v (after %v)", how, err, time.Since(start))
			}
		})
	}
}

// A TLS client that never stops pipelining must not starve the other
// clients of its event loop. The loop serves a plain connection one read
// per wake-up; a TLS connection may hold decrypted requests its socket no
// longer signals, so it is revisited — after the other ready connections,
// not by reading it until it runs dry, which with a client that writes
// faster than the server answers is never.
func TestTLSPipelinerCannotStarveItsLoop(t *testing.T) {
	s, cfg, other := tlsOneLoop(t)

	_, flood := dialTLS(t, s.Addr, cfg)
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

// tlsOneLoop starts a TLS server with one event loop, and a client of it
// ("other") that waits up to 20 s for a reply: long enough for a slow
// -race build, far shorter than a loop held for as long as a client likes.
func tlsOneLoop(t *testing.T) (*Server, *tls.Config, *redis.Client) {
	t.Helper()
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
	return s, cfg, other
}

// dialTLS connects to addr and shakes hands; raw is the socket under the
// TLS connection. Both close when the test ends.
func dialTLS(t *testing.T, addr string, cfg *tls.Config) (raw net.Conn, c *tls.Conn) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	c = tls.Client(raw, cfg)
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	return raw, c
}

// clientField is a numeric field of the CLIENT LIST line of the client at
// addr.
func clientField(t *testing.T, c *redis.Client, addr, field string) int64 {
	t.Helper()
	list, err := c.ClientList(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, " addr="+addr+" ") {
			continue
		}
		for _, kv := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(kv, field+"="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("CLIENT LIST %s=%q", field, v)
				}
				return n
			}
		}
	}
	t.Fatalf("no CLIENT LIST line with addr=%s and %s:\n%s", addr, field, list)
	return 0
}
