package tests

import (
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A TLS client that stops reading its replies leaves the server's write to
// it blocked on a full socket. Neither what that client sends next nor a
// CLIENT KILL of it may then stall the event loop it shares with other
// clients: the TLS layer answers a bad record with an alert and a close
// with close_notify, and those writes must not wait behind the blocked
// one.
func TestTLSStalledClientCannotStallTheLoop(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	s := StartServer(t, "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--io-threads", "1")
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
	other := s.Client(func(o *redis.Options) {
		o.TLSConfig = cfg
		o.ReadTimeout, o.WriteTimeout, o.MaxRetries = 5*time.Second, 5*time.Second, -1
	})
	if err := other.Ping(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}

	for _, how := range []string{"bad record", "client kill"} {
		t.Run(how, func(t *testing.T) {
			raw, err := net.Dial("tcp", s.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			stalled := tls.Client(raw, cfg)
			if err := stalled.Handshake(); err != nil {
				t.Fatal(err)
			}
			if _, err := stalled.Write([]byte("*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$7\r\nstalled\r\n")); err != nil {
				t.Fatal(err)
			}
			// Replies far larger than both sockets' buffers, never read.
			before, _ := strconv.ParseInt(infoField(t, other, "stats", "total_net_output_bytes"), 10, 64)
			if _, err := stalled.Write([]byte(strings.Repeat("*1\r\n$7\r\nCOMMAND\r\n", 2000))); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the stalled client's replies produced", func() bool {
				n, _ := strconv.ParseInt(infoField(t, other, "stats", "total_net_output_bytes"), 10, 64)
				return n-before > 30<<20
			})
			switch how {
			case "bad record":
				// Application data the server cannot decrypt: it answers with
				// an alert.
				junk := append([]byte{23, 3, 3, 0, 32}, make([]byte, 32)...)
				if _, err := raw.Write(junk); err != nil {
					t.Fatal(err)
				}
			case "client kill":
				if err := other.Do(ctx(t), "CLIENT", "KILL", "SKIPME", "yes", "ID", clientID(t, other, "stalled")).Err(); err != nil {
					t.Fatalf("CLIENT KILL: %v", err)
				}
			}
			start := time.Now()
			if err := other.Ping(ctx(t)).Err(); err != nil {
				t.Fatalf("another client on the loop, after the stalled client's %s: %v (after %v)", how, err, time.Since(start))
			}
		})
	}
}

// clientID is the id CLIENT LIST gives the client named name.
func clientID(t *testing.T, c *redis.Client, name string) string {
	t.Helper()
	list, err := c.ClientList(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " name="+name+" ") {
			for _, f := range strings.Fields(line) {
				if id, ok := strings.CutPrefix(f, "id="); ok {
					return id
				}
			}
		}
	}
	t.Fatalf("no client named %s in:\n%s", name, list)
	return ""
}
