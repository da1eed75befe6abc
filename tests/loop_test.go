package tests

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// commandStarted waits until INFO commandstats counts a call of cmd, which
// the server counts as the command starts. Each poll is itself a command
// answered by the event loop the slow command came through.
func commandStarted(t *testing.T, c *redis.Client, cmd string) {
	t.Helper()
	eventually(t, cmd+" started", func() bool {
		info, err := c.Info(ctx(t), "commandstats").Result()
		return err == nil && strings.Contains(info, "cmdstat_"+cmd+":calls=1,")
	})
}

// A command that takes long (DEBUG SLEEP, as a Raft round trip or an fsync
// would) runs aside: the one event loop (--io-threads 1) goes on serving
// the other clients, and the sleeper gets its reply afterwards.
func TestSlowCommandDoesNotHoldUpTheLoop(t *testing.T) {
	const sleep = 5 * time.Second
	s := StartServer(t, "--io-threads", "1")
	sleeper := s.Client(func(o *redis.Options) { o.ReadTimeout = 4 * sleep })
	slept := make(chan error, 1)
	sent := time.Now()
	go func() { slept <- sleeper.Do(ctx(t), "DEBUG", "SLEEP", sleep.Seconds()).Err() }()
	other := s.Client()
	commandStarted(t, other, "debug")
	start := time.Now()
	for i := range 100 {
		if err := other.Do(ctx(t), "CL.THROTTLE", fmt.Sprintf("k%d", i), 5, 10, 60).Err(); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	select {
	case err := <-slept:
		t.Fatalf("the sleeper was answered (%v) before the other client's 100 commands: the loop waited for it", err)
	default:
	}
	if took > sleep/2 {
		t.Fatalf("100 commands took %v while another client slept %v", took, sleep)
	}
	if err := <-slept; err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	if waited := time.Since(sent); waited < sleep {
		t.Fatalf("DEBUG SLEEP %v answered after %v", sleep, waited)
	}
	// A pipeline behind a waiting command keeps its order.
	pipe := sleeper.Pipeline()
	echo := pipe.Echo(ctx(t), "before")
	pipe.Do(ctx(t), "DEBUG", "SLEEP", "0.01")
	after := pipe.Do(ctx(t), "CL.THROTTLE", "k0", 5, 10, 60)
	if _, err := pipe.Exec(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if echo.Val() != "before" || len(ints(t, after)) != 5 {
		t.Fatalf("pipeline around DEBUG SLEEP: %q %v", echo.Val(), after.Val())
	}
}

// CLIENT KILL reaches a client whose command is still running aside: its
// socket closes at once and it leaves CLIENT LIST and connected_clients
// (the server lets the connection go once the command ends; that it is
// not counted out twice is TestKilledConnectionCountedOutOnce's).
func TestKillWhileACommandRunsAside(t *testing.T) {
	s := StartServer(t, "--io-threads", "1")
	victim, vr, id := namedVictim(t, s.Addr)
	// Long enough that every check below runs while the command does (the
	// server is killed when the test ends, the command with it).
	const sleep = 30 * time.Second
	victim.Write([]byte(fmt.Sprintf("DEBUG SLEEP %d\r\n", int(sleep.Seconds()))))
	c := s.Client()
	commandStarted(t, c, "debug")
	if n, err := c.ClientKillByFilter(ctx(t), "ID", id).Result(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL ID %s = %d, %v", id, n, err)
	}
	start := time.Now()
	if b, err := io.ReadAll(vr); len(b) > 0 || err != nil {
		t.Fatalf("killed sleeper read %q, %v; want EOF", b, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the killed sleeper's socket closed after %v, not at once", took)
	}
	if list := c.ClientList(ctx(t)).Val(); strings.Contains(list, "name=victim") {
		t.Fatalf("killed sleeper still listed:\n%s", list)
	}
	if n := infoField(t, c, "clients", "connected_clients"); n != "1" {
		t.Fatalf("connected_clients %s while the killed sleeper's command runs, want 1", n)
	}
	if took := time.Since(start); took >= sleep {
		t.Fatalf("the checks took %v, past the sleep: they showed nothing about a command still running", took)
	}
}

// Several event loops share one keyspace: clients spread over three loops
// hitting one key are admitted exactly the limit, and each loop serves.
func TestIOThreadsShareOneKeyspace(t *testing.T) {
	s := StartServer(t, "--io-threads", "3")
	setClock(t, s.Client(), future)
	const clients, each, limit = 12, 50, 100
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 1})
			defer c.Close()
			for range each {
				v, err := c.Do(ctx(t), "CL.THROTTLE", "shared", limit-1, 1, 3600).Int64Slice()
				if err != nil {
					errs <- err
					return
				}
				if v[0] == 0 {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := admitted.Load(); got != limit {
		t.Fatalf("%d of %d requests admitted over three loops, want exactly %d", got, clients*each, limit)
	}
	if _, err := startMustFail(t, "--io-threads", "-1", "--addr", freeAddr(t), "--data-dir", t.TempDir()); err == nil {
		t.Fatal("--io-threads -1 started")
	}
}

// An event loop that polls before it parks (--loop-spin) serves clients as
// one that parks at once: one client's round trips one after another (the
// case polling is for) and a few concurrent ones, each decision exact; a
// spin out of range is refused at start.
func TestLoopSpin(t *testing.T) {
	for _, spin := range []string{"0", "1ms"} {
		t.Run(spin, func(t *testing.T) {
			s := StartServer(t, "--io-threads", "1", "--loop-spin", spin)
			setClock(t, s.Client(), future)
			c := s.Client()
			const limit = 100
			admitted := 0
			for range 300 {
				v, err := c.Do(ctx(t), "CL.THROTTLE", "one", limit-1, 1, 3600).Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				if v[0] == 0 {
					admitted++
				}
			}
			if admitted != limit {
				t.Fatalf("one client: %d of 300 admitted, want %d", admitted, limit)
			}
			var wg sync.WaitGroup
			var got atomic.Int64
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 1})
					defer c.Close()
					for range 50 {
						v, err := c.Do(ctx(t), "CL.THROTTLE", "many", limit-1, 1, 3600).Int64Slice()
						if err != nil {
							t.Error(err)
							return
						}
						if v[0] == 0 {
							got.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if got.Load() != limit {
				t.Fatalf("eight clients: %d of 400 admitted, want %d", got.Load(), limit)
			}
		})
	}
	for _, bad := range []string{"-1us", "2ms"} {
		if _, err := startMustFail(t, "--loop-spin", bad, "--addr", freeAddr(t), "--data-dir", t.TempDir()); err == nil {
			t.Fatalf("--loop-spin %s started", bad)
		}
	}
}

// A TLS client's pipeline larger than a TLS record and the server's read
// buffer: the loop comes back to the connection until TLS holds nothing
// more, so no request waits in TLS' buffer for bytes that already arrived.
func TestTLSPipelineThroughTheLoop(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	s := StartServer(t, "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--io-threads", "1")
	c := s.Client(func(o *redis.Options) {
		o.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		o.ReadTimeout = 10 * time.Second
	})
	pipe := c.Pipeline()
	const n = 3000
	cmds := make([]*redis.Cmd, n)
	for i := range n {
		cmds[i] = pipe.Do(ctx(t), "ECHO", fmt.Sprintf("%05d%s", i, strings.Repeat("x", 40)))
	}
	if _, err := pipe.Exec(ctx(t)); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if v, _ := cmd.Text(); !strings.HasPrefix(v, fmt.Sprintf("%05d", i)) {
			t.Fatalf("reply %d over TLS: %q", i, v)
		}
	}
}
