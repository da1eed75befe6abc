package tests

import (
	"bufio"
	"context"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
)

// holdConns dials n connections to addr, each sending hello once; it
// returns those the server kept open (a door past its cap closes the rest
// at once).
func holdConns(t *testing.T, addr string, n int, hello []byte, answered func(*bufio.Reader) bool) []net.Conn {
	t.Helper()
	var mu sync.Mutex
	var kept []net.Conn
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(hello); err != nil || (answered != nil && !answered(bufio.NewReader(c))) {
				c.Close()
				return
			}
			c.SetDeadline(time.Time{})
			mu.Lock()
			kept = append(kept, c)
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range kept {
			c.Close()
		}
	})
	return kept
}

// allClosed waits until the server has closed every one of conns (a read
// ends), and fails past within.
func allClosed(t *testing.T, what string, conns []net.Conn, within time.Duration) {
	t.Helper()
	var open atomic.Int64
	open.Store(int64(len(conns)))
	deadline := time.Now().Add(within)
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(deadline)
			if _, err := io.Copy(io.Discard, c); err == nil || !isTimeout(err) {
				open.Add(-1)
			}
		})
	}
	wg.Wait()
	if n := open.Load(); n > 0 {
		t.Fatalf("%d of %d %s still open after %v", n, len(conns), what, within)
	}
}

// stillOpen are the conns the server has not closed (a short read times
// out rather than ending).
func stillOpen(conns []net.Conn) []net.Conn {
	var out []net.Conn
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := io.Copy(io.Discard, c); err != nil && isTimeout(err) {
			out = append(out, c)
		}
		c.SetReadDeadline(time.Time{})
	}
	return out
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// http2Preface is a gRPC client's first bytes: the HTTP/2 preface and an
// empty SETTINGS frame — and then nothing.
var http2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")

// Issue #31: nobody who reaches the HTTP or gRPC port can take the
// descriptors RESP needs. Under an open-files limit of 400, 450 idle HTTP
// keep-alive connections, 200 gRPC connections that sent only the preface
// and a request body trickled a byte at a time leave an authenticated
// redis-cli PING and a gRPC ShouldRateLimit with the token answering
// within a second; the stated timeouts then close every idle connection.
func TestDoorsCannotTakeRESPDescriptors(t *testing.T) {
	rules := writeRules(t, "edge.yaml", rlsClusterRules)
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	s := startLimited(t, 400, "--requirepass", "s3cret", "--rules", rules, "--http-addr", httpAddr, "--grpc-addr", grpcAddr,
		"--http-idle-timeout", "3s", "--http-read-timeout", "3s", "--grpc-idle-timeout", "3s", "--grpc-handshake-timeout", "2s")
	if !strings.Contains(s.Logs(), "maxclients lowered") || !strings.Contains(s.Logs(), "http_max_conns=92") {
		t.Fatalf("the start-up log does not say how 400 descriptors were shared:\n%s", s.Logs())
	}

	idleHTTP := holdConns(t, httpAddr, 450, []byte("GET /healthz HTTP/1.1\r\nHost: sluice\r\n\r\n"), func(r *bufio.Reader) bool {
		l, err := r.ReadString('\n')
		if err != nil || !strings.Contains(l, "200") {
			return false
		}
		for { // the headers and the 3-byte body "ok\n"
			if l, err = r.ReadString('\n'); err != nil || l == "\r\n" {
				break
			}
		}
		_, err = io.ReadFull(r, make([]byte, 3))
		return err == nil
	})
	prefaceOnly := holdConns(t, grpcAddr, 200, http2Preface, func(r *bufio.Reader) bool {
		_, err := io.ReadFull(r, make([]byte, 9)) // the server's SETTINGS frame header
		return err == nil
	})
	trickle := holdConns(t, httpAddr, 1, []byte("POST /json HTTP/1.1\r\nHost: sluice\r\nContent-Length: 1000\r\n\r\n"), nil)
	stopTrickle := make(chan struct{})
	defer close(stopTrickle)
	if len(trickle) == 1 {
		go func() {
			for {
				select {
				case <-stopTrickle:
					return
				case <-time.After(300 * time.Millisecond):
					if _, err := trickle[0].Write([]byte("{")); err != nil {
						return
					}
				}
			}
		}()
	}
	idleHTTP, prefaceOnly = stillOpen(idleHTTP), stillOpen(prefaceOnly)
	t.Logf("the server holds %d idle HTTP connections, %d preface-only gRPC connections", len(idleHTTP), len(prefaceOnly))
	if len(idleHTTP) > 92 || len(prefaceOnly) > 92 {
		t.Fatalf("a door holds more than its share: %d HTTP, %d gRPC (cap 92 each)", len(idleHTTP), len(prefaceOnly))
	}

	start := time.Now()
	out, err := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", portOf(s.Addr), "-a", "s3cret", "--no-auth-warning", "PING").CombinedOutput()
	if took := time.Since(start); err != nil || strings.TrimSpace(string(out)) != "PONG" || took > time.Second {
		t.Fatalf("redis-cli PING beside the held doors: %q %v after %v\n%s", out, err, took, s.Logs())
	}
	client, _ := rlsClient(t, grpcAddr)
	cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret"), time.Second)
	defer cancel()
	start = time.Now()
	if _, err := client.ShouldRateLimit(cctx, rlsRequest("edge", 1, "path=/in")); err != nil {
		t.Fatalf("ShouldRateLimit beside the held doors: %v after %v", err, time.Since(start))
	}

	allClosed(t, "idle HTTP keep-alive connections", idleHTTP, 10*time.Second)
	allClosed(t, "trickling HTTP requests", trickle, 10*time.Second)
	allClosed(t, "preface-only gRPC connections", prefaceOnly, 20*time.Second)
}

// /metrics asks for the password under --metrics-auth (Bearer, as
// Prometheus' authorization config sends it, or Basic); the probes stay
// open; --metrics-auth without a password is refused at start.
func TestMetricsAuth(t *testing.T) {
	httpAddr := freeAddr(t)
	StartServer(t, "--requirepass", "s3cret", "--metrics-auth", "--http-addr", httpAddr)
	base := "http://" + httpAddr
	if r := httpGet(t, base+"/metrics"); r.status != 401 {
		t.Fatalf("/metrics without the password: %d", r.status)
	}
	if r := httpGet(t, base+"/metrics", "Authorization", "Bearer wrong"); r.status != 401 {
		t.Fatalf("/metrics with a wrong token: %d", r.status)
	}
	if r := httpGet(t, base+"/metrics", "Authorization", "Bearer s3cret"); r.status != 200 || !strings.Contains(r.body, "sluice_connected_clients") {
		t.Fatalf("/metrics with the token: %d", r.status)
	}
	for _, probe := range []string{"/healthz", "/readyz"} {
		if r := httpGet(t, base+probe); r.status != 200 {
			t.Fatalf("%s under --metrics-auth: %d", probe, r.status)
		}
	}
	out, _ := startMustFail(t, "--metrics-auth", "--http-addr", freeAddr(t), "--data-dir", t.TempDir())
	if !strings.Contains(out, "--metrics-auth needs --requirepass") {
		t.Fatalf("--metrics-auth without a password: %s", out)
	}
}

// Flags and CONFIG mean what they say: --timeout is whole seconds (1500ms
// is refused, 2 is two seconds); CONFIG SET maxclients past what the
// open-files limit holds is refused with Redis' reason, and CONFIG GET
// reports what is in force.
func TestTimeoutAndMaxclientsMeanWhatTheySay(t *testing.T) {
	out, _ := startMustFail(t, "--timeout", "1500ms", "--data-dir", t.TempDir())
	if !strings.Contains(out, "not a whole number of seconds") {
		t.Fatalf("--timeout 1500ms: %s", out)
	}
	s := StartServer(t, "--timeout", "2")
	if v, _ := s.Client().ConfigGet(ctx(t), "timeout").Result(); v["timeout"] != "2" {
		t.Fatalf("CONFIG GET timeout after --timeout 2: %v", v)
	}
	l := startLimited(t, 256)
	c := l.Client()
	before, _ := c.ConfigGet(ctx(t), "maxclients").Result()
	if before["maxclients"] != "224" {
		t.Fatalf("maxclients under ulimit -n 256: %v", before)
	}
	err := c.ConfigSet(ctx(t), "maxclients", "100000").Err()
	if err == nil || !strings.Contains(err.Error(), "The operating system is not able to handle the specified number of clients, try with 224") {
		t.Fatalf("CONFIG SET maxclients 100000 under ulimit -n 256: %v", err)
	}
	if after, _ := c.ConfigGet(ctx(t), "maxclients").Result(); after["maxclients"] != "224" {
		t.Fatalf("CONFIG GET maxclients after the refusal: %v", after)
	}
	if err := c.ConfigSet(ctx(t), "maxclients", "100").Err(); err != nil {
		t.Fatalf("CONFIG SET maxclients 100: %v", err)
	}
}

// A member whose gRPC or HTTP door cannot bind (its port taken) exits
// naming the door and the port, before it joins its Raft group: it never
// takes part in an election, so a restart loop cannot unsettle the group.
func TestADoorThatCannotBindStopsTheMemberBeforeRaft(t *testing.T) {
	for _, door := range []string{"--grpc-addr", "--http-addr"} {
		t.Run(door, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			self, other := freeAddr(t), freeAddr(t)
			s := &Server{t: t, DataDir: t.TempDir()}
			s.Args = []string{"--node-id", "n1", "--data-dir", s.DataDir,
				"--peers", "n1=" + s.addrOr(t) + "@" + self + ",n2=" + freeAddr(t) + "@" + other,
				door, taken.Addr().String()}
			err = s.TryStart()
			t.Cleanup(s.Kill)
			if err == nil {
				t.Fatalf("started with %s %s taken", door, taken.Addr())
			}
			logs := s.Logs()
			if !strings.Contains(logs, taken.Addr().String()) || !strings.Contains(logs, "address already in use") {
				t.Fatalf("the exit does not name the taken port %s:\n%s", taken.Addr(), logs)
			}
			if strings.Contains(logs, "entering follower state") {
				t.Fatalf("the member joined its Raft group before it found its door taken:\n%s", logs)
			}
		})
	}
}

// addrOr is s.Addr, picked now if unset (the --peers list names it before
// the process starts).
func (s *Server) addrOr(t testing.TB) string {
	if s.Addr == "" {
		s.Addr = freeAddr(t)
	}
	return s.Addr
}

// The cluster secret file deploy/envoy ships is a placeholder everyone has:
// a member given it refuses to start, and says what to do.
func TestThePlaceholderClusterSecretIsRefused(t *testing.T) {
	self := freeAddr(t)
	s := &Server{t: t, DataDir: t.TempDir()}
	s.Args = []string{"--node-id", "n1", "--data-dir", s.DataDir,
		"--peers", "n1=" + s.addrOr(t) + "@" + self + ",n2=" + freeAddr(t) + "@" + freeAddr(t),
		"--cluster-secret-file", "../deploy/envoy/cluster-secret"}
	err := s.TryStart()
	t.Cleanup(s.Kill)
	if err == nil || !strings.Contains(s.Logs(), "placeholder") || !strings.Contains(s.Logs(), "/dev/urandom") {
		t.Fatalf("started with the placeholder secret (%v):\n%s", err, s.Logs())
	}
}
