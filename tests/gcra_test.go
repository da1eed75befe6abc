package tests

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestThrottleRedisCellExample(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	got := ints(t, c.Do(ctx(t), "CL.THROTTLE", "user123", 15, 30, 60))
	if want := []int64{0, 16, 15, -1, 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("first reply %v, want %v", got, want)
	}
	got = ints(t, c.Do(ctx(t), "CL.THROTTLE", "user123", 15, 30, 60))
	if want := []int64{0, 16, 14, -1, 4}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("second reply %v, want %v", got, want)
	}
	// GET answers the stored TAT in ns, as redis-cell does: two emission
	// intervals of 2 s after now.
	tat, err := c.Get(ctx(t), "user123").Int64()
	if err != nil || tat != future+4e9 {
		t.Fatalf("GET = %d, %v; want %d", tat, err, future+int64(4e9))
	}
	if pttl := c.PTTL(ctx(t), "user123").Val(); pttl != 4*time.Second {
		t.Fatalf("PTTL = %v, want 4s", pttl)
	}
	if typ := c.Type(ctx(t), "user123").Val(); typ != "gcra" {
		t.Fatalf("TYPE = %q", typ)
	}
}

func TestThrottleRedisCLI(t *testing.T) {
	s := StartServer(t)
	out := redisCLI(t, s.Addr, "CL.THROTTLE", "user123", "15", "30", "60")
	if want := "0\n16\n15\n-1\n2\n"; out != want {
		t.Fatalf("redis-cli CL.THROTTLE printed %q, want %q", out, want)
	}
	if out := redisCLI(t, s.Addr, "PING"); out != "PONG\n" {
		t.Fatalf("redis-cli PING printed %q", out)
	}
}

// Exhaust a burst, then wait (on the debug clock) for one emission interval.
func TestThrottleBurstAndRecovery(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	for i := range 5 {
		got := ints(t, c.Do(ctx(t), "CL.THROTTLE", "burst", 4, 1, 10))
		if got[0] != 0 || got[2] != int64(4-i) {
			t.Fatalf("request %d: %v, want allowed with %d remaining", i, got, 4-i)
		}
	}
	got := ints(t, c.Do(ctx(t), "CL.THROTTLE", "burst", 4, 1, 10))
	if want := []int64{1, 5, 0, 10, 50}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("over the burst: %v, want %v", got, want)
	}
	advance(t, c, 10*time.Second)
	got = ints(t, c.Do(ctx(t), "CL.THROTTLE", "burst", 4, 1, 10))
	if got[0] != 0 || got[2] != 0 {
		t.Fatalf("after one interval: %v, want allowed with 0 remaining", got)
	}
}

func TestThrottleExpiryOnDebugClock(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "exp", 1, 1, 60))
	if n := c.Exists(ctx(t), "exp").Val(); n != 1 {
		t.Fatalf("EXISTS = %d right after", n)
	}
	advance(t, c, 60*time.Second-time.Nanosecond)
	if pttl := c.PTTL(ctx(t), "exp").Val(); pttl != 0 {
		t.Fatalf("PTTL 1ns before expiry = %v, want 0", pttl)
	}
	advance(t, c, time.Nanosecond)
	if n := c.Exists(ctx(t), "exp").Val(); n != 0 {
		t.Fatal("key still exists at its TAT")
	}
	if ttl := c.Do(ctx(t), "PTTL", "exp").Val(); ttl != int64(-2) {
		t.Fatalf("PTTL of expired key = %v, want -2", ttl)
	}
	if v, err := c.Get(ctx(t), "exp").Result(); err != redis.Nil {
		t.Fatalf("GET of expired key = %q, %v", v, err)
	}
	if n := c.DBSize(ctx(t)).Val(); n != 0 {
		// The sweep may not have run yet, but lazy expiry removed it on access.
		t.Fatalf("DBSIZE = %d after the key expired and was read", n)
	}
	got := ints(t, c.Do(ctx(t), "CL.THROTTLE", "exp", 1, 1, 60))
	if got[2] != 1 {
		t.Fatalf("an expired key must act as new: %v", got)
	}
}

// The background sweep removes expired keys nobody reads again, once
// their grace is past (machine.TestSweepGrace checks the grace itself at
// fixed instants).
func TestSweepRemovesUnreadKeys(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	pipe := c.Pipeline()
	for i := range 2000 {
		pipe.Do(ctx(t), "CL.THROTTLE", fmt.Sprintf("sweep:%d", i), 0, 1, 1)
	}
	if _, err := pipe.Exec(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n := c.DBSize(ctx(t)).Val(); n != 2000 {
		t.Fatalf("DBSIZE = %d, want 2000", n)
	}
	advance(t, c, 3*time.Second)
	if n := c.DBSize(ctx(t)).Val(); n != 0 {
		t.Fatalf("DBSIZE = %d with every key expired, want 0", n)
	}
	// DBSIZE counts live keys; expired_keys counts what the sweep removed.
	eventually(t, "the sweep removes every expired key", func() bool {
		return infoField(t, c, "stats", "expired_keys") == "2000"
	})
}

// A pipeline of 1000 commands on one key is answered in order: remaining
// counts down one by one.
func TestPipelineInOrder(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, 1000)
	for i := range cmds {
		cmds[i] = pipe.Do(ctx(t), "CL.THROTTLE", "pipe", 1999, 1, 3600)
	}
	if _, err := pipe.Exec(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		got := ints(t, cmd)
		if got[0] != 0 || got[2] != int64(1999-i) {
			t.Fatalf("reply %d = %v, want remaining %d", i, got, 1999-i)
		}
	}
}

// 50 clients hammer one key at a frozen instant: exactly the burst passes.
func TestConcurrentClientsAdmitExactly(t *testing.T) {
	s := StartServer(t)
	admin := s.Client()
	setClock(t, admin, future)
	const clients, each, limit = 50, 20, 100
	var wg sync.WaitGroup
	allowed := make(chan int, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := s.Client()
			n := 0
			for range each {
				got := ints(t, c.Do(ctx(t), "CL.THROTTLE", "shared", limit-1, 1, 3600))
				if got[0] == 0 {
					n++
				}
			}
			allowed <- n
		}()
	}
	wg.Wait()
	close(allowed)
	total := 0
	for n := range allowed {
		total += n
	}
	if total != limit {
		t.Fatalf("%d clients admitted %d requests in total, want exactly %d", clients, total, limit)
	}
}

func TestThrottleErrors(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"CL.THROTTLE", "k", 1, 1}, "ERR wrong number of arguments for 'cl.throttle' command"},
		{[]any{"CL.THROTTLE", "k", 1, 1, 1, 1, 1}, "ERR wrong number of arguments for 'cl.throttle' command"},
		{[]any{"CL.THROTTLE", "k", "x", 1, 1}, "ERR value is not an integer or out of range"},
		{[]any{"CL.THROTTLE", "k", 1, 1, "1.5"}, "ERR value is not an integer or out of range"},
		{[]any{"CL.THROTTLE", "k", 1, 0, 60}, "ERR zero rates are not supported"},
		{[]any{"CL.THROTTLE", "k", 1, 10, 0}, "ERR zero rates are not supported"},
		{[]any{"CL.THROTTLE", "k", -1, 10, 60}, "ERR max_burst, count and period must not be negative"},
		{[]any{"CL.THROTTLE", "k", 1, 10, 60, -1}, "ERR quantity must not be negative"},
		{[]any{"NOSUCH", "a", "b"}, "ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' "},
		{[]any{"GET"}, "ERR wrong number of arguments for 'get' command"},
		{[]any{"SELECT", 1}, "ERR DB index is out of range"},
		{[]any{"DEBUG", "CLOCK", "SET", "x"}, "ERR value is not an integer or out of range"},
	} {
		err := c.Do(ctx(t), tc.args...).Err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	// Nothing above created a key, and the server still answers.
	if n := c.DBSize(ctx(t)).Val(); n != 0 {
		t.Fatalf("DBSIZE = %d after only bad commands", n)
	}
	if c.Ping(ctx(t)).Val() != "PONG" {
		t.Fatal("server stopped answering")
	}
}

// Quantity 0 peeks: it answers but never creates a key.
func TestThrottlePeek(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	got := ints(t, c.Do(ctx(t), "CL.THROTTLE", "peek", 15, 30, 60, 0))
	if want := []int64{0, 16, 16, -1, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("peek on a new key = %v, want %v", got, want)
	}
	if c.Exists(ctx(t), "peek").Val() != 0 {
		t.Fatal("a peek created the key")
	}
}

func TestDebugRefusedByDefault(t *testing.T) {
	s := &Server{t: t, DataDir: t.TempDir()}
	s.Args = []string{"--data-dir", s.DataDir}
	s.Start()
	t.Cleanup(s.Kill)
	err := s.Client().Do(ctx(t), "DEBUG", "CLOCK", "SET", future).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "ERR DEBUG command not allowed") {
		t.Fatalf("DEBUG without --enable-debug-command: %v", err)
	}
}

func TestAuth(t *testing.T) {
	s := StartServer(t, "--requirepass", "s3cret")
	c := s.Client()
	if err := c.Do(ctx(t), "CL.THROTTLE", "k", 1, 1, 1).Err(); err == nil || err.Error() != "NOAUTH Authentication required." {
		t.Fatalf("unauthenticated command: %v", err)
	}
	if err := c.Do(ctx(t), "AUTH", "wrong").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Fatalf("AUTH wrong: %v", err)
	}
	if err := c.Do(ctx(t), "AUTH", "nobody", "s3cret").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Fatalf("AUTH with another user: %v", err)
	}
	authed := s.Client(func(o *redis.Options) { o.Password = "s3cret" })
	if err := authed.Do(ctx(t), "CL.THROTTLE", "k", 1, 1, 1).Err(); err != nil {
		t.Fatalf("authenticated command: %v", err)
	}
	user := s.Client(func(o *redis.Options) { o.Username, o.Password = "default", "s3cret" })
	if err := user.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("AUTH default s3cret: %v", err)
	}
	if out := redisCLI(t, s.Addr, "--no-auth-warning", "-a", "s3cret", "PING"); out != "PONG\n" {
		t.Fatalf("redis-cli -a: %q", out)
	}
}

func TestMaxClients(t *testing.T) {
	s := StartServer(t, "--maxclients", "2")
	var conns []net.Conn
	for range 2 {
		cn, err := net.Dial("tcp", s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer cn.Close()
		conns = append(conns, cn)
		cn.Write([]byte("PING\r\n"))
		buf := make([]byte, 64)
		n, _ := cn.Read(buf)
		if string(buf[:n]) != "+PONG\r\n" {
			t.Fatalf("client within the limit got %q", buf[:n])
		}
	}
	cn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	cn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 128)
	n, _ := cn.Read(buf)
	if got := string(buf[:n]); got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("third client got %q", got)
	}
	conns[0].Close()
	// The slot frees up once the server has seen the close.
	eventually(t, "a closed client's slot is freed", func() bool {
		cn, err := net.Dial("tcp", s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer cn.Close()
		cn.SetReadDeadline(time.Now().Add(10 * time.Second))
		cn.Write([]byte("PING\r\n"))
		n, _ := cn.Read(buf)
		return string(buf[:n]) == "+PONG\r\n"
	})
}

// Basic Redis commands a client expects, through go-redis.
func TestRedisBasics(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	if v := c.Echo(ctx(t), "hi").Val(); v != "hi" {
		t.Fatalf("ECHO = %q", v)
	}
	tm := c.Time(ctx(t)).Val()
	if tm.UnixNano() != future {
		t.Fatalf("TIME = %v, want the debug clock %v", tm.UnixNano(), future)
	}
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "a", 1, 1, 60))
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "b", 1, 1, 60))
	if n := c.Exists(ctx(t), "a", "b", "c").Val(); n != 2 {
		t.Fatalf("EXISTS a b c = %d", n)
	}
	if ttl := c.TTL(ctx(t), "a").Val(); ttl != 60*time.Second {
		t.Fatalf("TTL = %v", ttl)
	}
	if n := c.Del(ctx(t), "a", "c").Val(); n != 1 {
		t.Fatalf("DEL a c = %d", n)
	}
	if n := c.Unlink(ctx(t), "b").Val(); n != 1 {
		t.Fatalf("UNLINK b = %d", n)
	}
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "a", 1, 1, 60))
	if err := c.FlushAll(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	if n := c.DBSize(ctx(t)).Val(); n != 0 {
		t.Fatalf("DBSIZE after FLUSHALL = %d", n)
	}
	info := c.Info(ctx(t)).Val()
	for _, counter := range []string{"total_commands_processed", "total_net_input_bytes", "total_net_output_bytes"} {
		if v := infoField(t, c, "stats", counter); v == "0" {
			t.Errorf("INFO %s = %q after a dozen commands", counter, v)
		}
	}
	for _, section := range []string{"# Server", "# Clients", "# Memory", "# Stats", "# Keyspace", "redis_version:", "connected_clients:"} {
		if !strings.Contains(info, section) {
			t.Errorf("INFO lacks %q", section)
		}
	}
	if n := c.Do(ctx(t), "COMMAND", "COUNT").Val(); n.(int64) < 20 {
		t.Fatalf("COMMAND COUNT = %v", n)
	}
	if err := c.Do(ctx(t), "SELECT", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// redis-cli reading commands from stdin first loads COMMAND DOCS to build
// its help; a malformed docs reply crashes it, so drive that path.
func TestRedisCLIStdin(t *testing.T) {
	s := StartServer(t)
	host, port, _ := net.SplitHostPort(s.Addr)
	cmd := exec.Command("redis-cli", "-h", host, "-p", port)
	cmd.Stdin = strings.NewReader("PING\nCL.THROTTLE stdin 15 30 60\nHELLO 3\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli with commands on stdin: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "PONG\n0\n16\n15\n-1\n2\n") {
		t.Fatalf("redis-cli printed %q", out)
	}
}

// --timeout is whole seconds, as Redis' timeout: an idle connection is
// closed by the server (EOF, not the test's own deadline) after a second,
// not before. (It ran at 300ms once, read as 0 — never — and passed on the
// test's deadline.)
func TestIdleTimeout(t *testing.T) {
	s := StartServer(t, "--timeout", "1")
	cn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	cn.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	n, err := cn.Read(make([]byte, 1))
	if n != 0 || err == nil || isTimeout(err) {
		t.Fatalf("idle connection read %d bytes, err %v: want the server to close it", n, err)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("closed after %v, before the 1 s idle timeout", waited)
	}
}
