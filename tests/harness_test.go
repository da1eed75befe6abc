// Package tests drives the built sluice binary with real clients: go-redis
// and redis-cli. Each test starts its own server on a port of its own.
package tests

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/netproxy"
)

// binary is the sluice binary built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sluice")
	flags := []string{"build", "-race", "-o", binary}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		flags = []string{"build", "-o", binary}
	}
	if os.Getenv("SLUICE_ROBUSTNESS") == "1" {
		// The robustness suite arms failpoints (--failpoints): a build
		// of its own, never the one the other tests run.
		flags = append(flags, "-tags", "failpoints")
		if os.Getenv("SLUICE_ROBUSTNESS_RACE") == "0" {
			// A long run: as many calls as the box serves, which the
			// race detector would cut several times.
			flags = slices.DeleteFunc(flags, func(f string) bool { return f == "-race" })
		}
	}
	build := exec.Command("go", append(flags, "../cmd/sluice")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build sluice:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// plainBinary is sluice built without the race detector, for the tests
// that measure memory (the detector's shadow memory multiplies it); built
// on first use, beside binary.
var plainBinary = sync.OnceValues(func() (string, error) {
	path := filepath.Join(filepath.Dir(binary), "sluice-plain")
	out, err := exec.Command("go", "build", "-o", path, "../cmd/sluice").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build sluice without -race: %v\n%s", err, out)
	}
	return path, nil
})

// StartPlainServer is StartServer with sluice built without the race
// detector (plainBinary).
func StartPlainServer(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin, err := plainBinary()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, DataDir: t.TempDir(), bin: bin}
	s.Args = append([]string{"--enable-debug-command", "--data-dir", s.DataDir}, extra...)
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Server is a running sluice process.
type Server struct {
	// bin is the binary it runs ("": binary); ThisBuild are arguments
	// given only when it runs this build (what an older one would refuse).
	bin       string
	ThisBuild []string
	t         testing.TB
	Addr      string
	DataDir   string
	Args      []string
	// TLS, when set, is how the harness's clients reach a server started
	// with --tls-cert-file.
	TLS *tls.Config
	// Argv, when set, is the whole command line run (Args and Addr are
	// not added: Addr says where its clients connect), Dir its working
	// directory and Attr its process attributes (a user to run as).
	Argv []string
	Dir  string
	Attr *syscall.SysProcAttr
	cmd  *exec.Cmd
	logs *logBuffer
	// earlier are the logs of the runs before this one (AllLogs).
	earlier strings.Builder
	exited  chan struct{}
}

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t testing.TB) string {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		// The kernel may give a port it gave before, not yet taken by the
		// server it was meant for: never hand one out twice.
		if _, taken := handedOut.LoadOrStore(addr, true); !taken {
			return addr
		}
	}
}

// handedOut are the addresses freeAddr gave in this test process.
var handedOut sync.Map

// StartServer runs sluice with the debug command on, a fresh data dir, a
// free port, and extra flags; it is stopped when the test ends.
func StartServer(t testing.TB, extra ...string) *Server {
	t.Helper()
	s := &Server{t: t, DataDir: t.TempDir()}
	s.Args = append([]string{"--enable-debug-command", "--data-dir", s.DataDir}, extra...)
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Start (re)starts the process with s.Args on a new free port unless
// s.Addr is already set.
func (s *Server) Start() {
	s.t.Helper()
	if err := s.TryStart(); err != nil {
		s.t.Fatal(err)
	}
}

// TryStart is Start that returns why the process did not get ready (it
// exited, or took over 20 s) instead of failing the test: for goroutines
// other than the test's.
func (s *Server) TryStart() error {
	if s.Addr == "" {
		s.Addr = freeAddr(s.t)
	}
	args := append([]string{"--addr", s.Addr}, s.Args...)
	bin := binary
	if s.bin != "" {
		bin = s.bin
	} else {
		args = append(args, s.ThisBuild...)
	}
	s.cmd = exec.Command(bin, args...)
	if s.Argv != nil {
		s.cmd = exec.Command(s.Argv[0], s.Argv[1:]...)
	}
	s.cmd.Dir, s.cmd.SysProcAttr = s.Dir, s.Attr
	if s.logs != nil {
		s.earlier.WriteString(s.logs.String())
		s.earlier.WriteString("--- started again ---\n")
	}
	s.logs = &logBuffer{}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.exited = make(chan struct{})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			s.logs.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "sluice ready") {
				once = true
				close(ready)
			}
		}
		s.cmd.Wait()
		close(s.exited)
	}()
	select {
	case <-ready:
		return nil
	case <-s.exited:
		return fmt.Errorf("sluice exited before it was ready:\n%s", s.logs.String())
	case <-time.After(20 * time.Second):
		return fmt.Errorf("sluice not ready after 20s:\n%s", s.logs.String())
	}
}

// Stop sends SIGTERM and waits for a graceful exit.
func (s *Server) Stop() {
	s.t.Helper()
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("sluice did not stop on SIGINT:\n%s", s.logs.String())
	}
	s.cmd = nil
}

// Kill stops the process at once (SIGKILL), as a crash would.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Logs is what the server wrote to stderr so far (since it last started).
func (s *Server) Logs() string { return s.logs.String() }

// AllLogs is what the server wrote to stderr in every run of it so far,
// a line between runs.
func (s *Server) AllLogs() string { return s.earlier.String() + s.logs.String() }

// Client returns a go-redis client for the server, closed with the test.
func (s *Server) Client(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: s.Addr, Protocol: 2, TLSConfig: s.TLS}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	s.t.Cleanup(func() { c.Close() })
	return c
}

// ctx bounds every client call of a test.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// ints converts a limiter reply to []int64.
func ints(t testing.TB, cmd *redis.Cmd) []int64 {
	t.Helper()
	v, err := cmd.Result()
	if err != nil {
		t.Fatalf("command failed: %v", err)
	}
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("reply %#v is not an array", v)
	}
	out := make([]int64, len(arr))
	for i, x := range arr {
		n, ok := x.(int64)
		if !ok {
			t.Fatalf("element %d of %#v is not an integer", i, v)
		}
		out[i] = n
	}
	return out
}

// setClock freezes the server's clock at unixNs through DEBUG CLOCK SET.
func setClock(t testing.TB, c *redis.Client, unixNs int64) {
	t.Helper()
	if err := c.Do(ctx(t), "DEBUG", "CLOCK", "SET", unixNs).Err(); err != nil {
		t.Fatalf("DEBUG CLOCK SET: %v", err)
	}
}

// advance moves the frozen clock forward by d.
func advance(t testing.TB, c *redis.Client, d time.Duration) {
	t.Helper()
	if err := c.Do(ctx(t), "DEBUG", "CLOCK", "ADVANCE", int64(d)).Err(); err != nil {
		t.Fatalf("DEBUG CLOCK ADVANCE: %v", err)
	}
}

// future is a fixed instant after any real clock this suite runs under
// (2100-01-01T00:00:00Z), so a frozen clock is never raised by the
// never-backwards rule.
const future = int64(4102444800) * 1e9

// redisCLI runs redis-cli against the server and returns its output.
func redisCLI(t testing.TB, addr string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli is not installed (.ci/run installs redis-tools): %v", err)
	}
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command(path, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// startMustFail runs sluice with args and expects it to exit on its own
// (refusing to start); it returns what the process printed and its exit
// error. A process still running after 20 s fails the test.
func startMustFail(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("sluice %v kept running; it should have refused to start", args)
	}
	return string(out), err
}

// infoField reads one field of one INFO section.
func infoField(t testing.TB, c *redis.Client, section, field string) string {
	t.Helper()
	info, err := c.Info(ctx(t), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s has no %s:\n%s", section, field, info)
	return ""
}

// eventually polls cond until it holds, for progress made by the server in
// the background (the sweep, a closed connection being noticed); it never
// stands in for crossing a limit, which tests do with the debug clock.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	eventuallyExplained(t, what, cond, nil)
}

// dialRaw connects a raw client to addr, for tests that speak RESP a byte
// at a time: its reads and writes give up after 20 s rather than hang the
// test, and it is closed when the test ends (if not before).
func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// eventuallyExplained is eventually whose failure also says what explain
// returns (the last answer seen, the servers' logs).
func eventuallyExplained(t testing.TB, what string, cond func() bool, explain func() string) {
	t.Helper()
	eventuallyWithin(t, 20*time.Second, what, cond, explain)
}

// eventuallyWithin is eventuallyExplained for progress whose bound is
// longer than 20 s (say why where it is used).
func eventuallyWithin(t testing.TB, limit time.Duration, what string, cond func() bool, explain func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			if explain != nil {
				t.Fatalf("%s: not reached in %v; %s", what, limit, explain())
			}
			t.Fatalf("%s: not reached in %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logBuffer is a server's stderr as read so far: written by the goroutine
// reading the pipe, read by the test.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newProxy is a netproxy to target on a port freeAddr never handed out:
// the system may give the proxy a port another test server was given and
// has not started listening on yet.
func newProxy(t testing.TB, target string) *netproxy.Proxy {
	t.Helper()
	for {
		p, err := netproxy.New(target)
		if err != nil {
			t.Fatal(err)
		}
		if _, taken := handedOut.LoadOrStore(p.Addr(), true); !taken {
			t.Cleanup(func() { p.Close() })
			return p
		}
		p.Close()
	}
}
