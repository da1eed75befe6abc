package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// go-redis with its RESP3 default handshake: HELLO 3, CLIENT SETINFO,
// RESP3 nulls and maps, and limiter replies that stay integer arrays.
func TestGoRedisRESP3(t *testing.T) {
	s := StartServer(t)
	c := s.Client(func(o *redis.Options) { o.Protocol = 3; o.ClientName = "compat3" })
	setClock(t, c, future)
	hello, err := c.Do(ctx(t), "HELLO", "3").Result()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := hello.(map[any]any)
	if !ok {
		t.Fatalf("HELLO 3 reply %T %#v is not a RESP3 map", hello, hello)
	}
	if m["server"] != "redis" || m["version"] != "7.2.0" || m["proto"] != int64(3) || m["mode"] != "cluster" ||
		m["role"] != "master" {
		t.Fatalf("HELLO 3 = %#v", m)
	}
	if _, ok := m["id"].(int64); !ok {
		t.Fatalf("HELLO id %#v", m["id"])
	}
	got := ints(t, c.Do(ctx(t), "CL.THROTTLE", "user123", 15, 30, 60))
	if fmt.Sprint(got) != "[0 16 15 -1 2]" {
		t.Fatalf("CL.THROTTLE over RESP3 = %v", got)
	}
	if err := c.Get(ctx(t), "missing").Err(); err != redis.Nil {
		t.Fatalf("GET missing over RESP3: %v, want redis.Nil", err)
	}
	info := c.ClientInfo(ctx(t)).Val()
	if info == nil || info.Name != "compat3" || info.Resp != 3 || !strings.HasPrefix(info.LibName, "go-redis(") ||
		info.LibVer != redis.Version() || info.LastCmd != "client|info" {
		t.Fatalf("CLIENT INFO as go-redis parses it: %+v", info)
	}
	cfg, err := c.ConfigGet(ctx(t), "maxclients").Result()
	if err != nil || cfg["maxclients"] != "10000" {
		t.Fatalf("CONFIG GET over RESP3 = %v, %v", cfg, err)
	}
}

func TestGoRedisRESP2(t *testing.T) {
	s := StartServer(t)
	c := s.Client(func(o *redis.Options) { o.Protocol = 2 })
	setClock(t, c, future)
	hello, err := c.Do(ctx(t), "HELLO", "2").Result()
	if err != nil {
		t.Fatal(err)
	}
	arr, ok := hello.([]any)
	if !ok || len(arr) != 14 || arr[0] != "server" || arr[5] != int64(2) {
		t.Fatalf("HELLO 2 = %#v, want a flat array of 14", hello)
	}
	if err := c.Get(ctx(t), "missing").Err(); err != redis.Nil {
		t.Fatalf("GET missing: %v", err)
	}
	got := ints(t, c.Do(ctx(t), "CL.THROTTLE", "user123", 15, 30, 60))
	if fmt.Sprint(got) != "[0 16 15 -1 2]" {
		t.Fatalf("CL.THROTTLE = %v", got)
	}
	info := c.ClientInfo(ctx(t)).Val()
	if info == nil || info.Resp != 2 || !strings.HasPrefix(info.LibName, "go-redis(") {
		t.Fatalf("CLIENT INFO = %+v", info)
	}
	if err := c.Do(ctx(t), "HELLO", "4").Err(); err == nil || err.Error() != "NOPROTO unsupported protocol version" {
		t.Fatalf("HELLO 4: %v", err)
	}
	// The COMMAND table parses as go-redis' ClusterClient reads it.
	cmds, err := c.Command(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	th := cmds["cl.throttle"]
	if th == nil || th.Arity != -5 || th.FirstKeyPos != 1 || th.LastKeyPos != 1 || th.StepCount != 1 || th.ReadOnly {
		t.Fatalf("COMMAND cl.throttle = %+v", th)
	}
	if get := cmds["get"]; get == nil || !get.ReadOnly {
		t.Fatalf("COMMAND get = %+v", get)
	}
}

func TestScanAndKeys(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	want := map[string]bool{}
	for i := range 300 {
		k := fmt.Sprintf("scan:%d", i)
		want[k] = true
		ints(t, c.Do(ctx(t), "CL.THROTTLE", k, 5, 1, 60))
	}
	ints(t, c.Do(ctx(t), "CL.THROTTLE", "other", 5, 1, 60))
	seen := map[string]int{}
	it := c.Scan(ctx(t), 0, "scan:*", 25).Iterator()
	for it.Next(ctx(t)) {
		seen[it.Val()]++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(want) {
		t.Fatalf("SCAN MATCH scan:* found %d keys, want %d", len(seen), len(want))
	}
	for k, n := range seen {
		if !want[k] || n != 1 {
			t.Fatalf("SCAN returned %q %d times", k, n)
		}
	}
	keys, _, err := c.ScanType(ctx(t), 0, "", 1000, "gcra").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("SCAN TYPE gcra: %v %v", keys, err)
	}
	if got := c.Keys(ctx(t), "scan:1?").Val(); len(got) != 10 {
		t.Fatalf("KEYS scan:1? = %v", got)
	}
	out := redisCLI(t, s.Addr, "--scan", "--pattern", "scan:2?")
	lines := strings.Fields(out)
	sort.Strings(lines)
	if len(lines) != 10 || lines[0] != "scan:20" || lines[9] != "scan:29" {
		t.Fatalf("redis-cli --scan --pattern scan:2? printed %q", out)
	}
}

func TestConfigGetSet(t *testing.T) {
	s := StartServer(t, "--maxclients", "100", "--timeout", "0")
	c := s.Client()
	got := c.ConfigGet(ctx(t), "*").Val()
	for k, v := range map[string]string{"maxclients": "100", "timeout": "0", "cluster-enabled": "yes",
		"maxmemory-policy": "noeviction", "dir": s.DataDir, "protected-mode": "yes", "proto-max-bulk-len": "536870912"} {
		if got[k] != v {
			t.Errorf("CONFIG GET %s = %q, want %q", k, got[k], v)
		}
	}
	if err := c.Do(ctx(t), "CONFIG", "SET", "dir", "/").Err(); err == nil ||
		!strings.Contains(err.Error(), "can't set immutable config") {
		t.Fatalf("CONFIG SET dir: %v", err)
	}
	// Lower maxclients to the connections open now: the next is refused.
	c.Ping(ctx(t))
	n := c.PoolStats().TotalConns
	if err := c.ConfigSet(ctx(t), "maxclients", fmt.Sprint(n)).Err(); err != nil {
		t.Fatal(err)
	}
	cn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	cn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, _ := bufio.NewReader(cn).ReadString('\n')
	if line != "-ERR max number of clients reached\r\n" {
		t.Fatalf("over the new maxclients: %q", line)
	}
	if v := c.ConfigGet(ctx(t), "maxclients").Val()["maxclients"]; v != fmt.Sprint(n) {
		t.Fatalf("maxclients reads back %q", v)
	}
	if err := c.ConfigSet(ctx(t), "maxclients", "100").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigResetStat(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	// RESETSTAT itself is counted, as in Redis.
	if st, err := c.Info(ctx(t), "stats").Result(); !strings.Contains(st, "total_commands_processed:1\r\n") {
		t.Fatalf("INFO stats after RESETSTAT (%v):\n%s", err, st)
	}
}

// readLine reads one reply line from a raw connection.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v (got %q)", err, line)
	}
	return line
}

// namedVictim connects a raw client named "victim" (closed when the test
// ends) and returns it, its reader and its CLIENT ID.
func namedVictim(t *testing.T, addr string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	victim := dialRaw(t, addr)
	vr := bufio.NewReader(victim)
	victim.Write([]byte("CLIENT SETNAME victim\r\nCLIENT ID\r\n"))
	if l := readLine(t, vr); l != "+OK\r\n" {
		t.Fatalf("SETNAME: %q", l)
	}
	return victim, vr, strings.TrimSpace(strings.TrimPrefix(readLine(t, vr), ":"))
}

func TestClientListAndKill(t *testing.T) {
	s := StartServer(t)
	_, vr, id := namedVictim(t, s.Addr)

	c := s.Client()
	c.Do(ctx(t), "CLIENT", "SETNAME", "killer")
	list := c.ClientList(ctx(t)).Val()
	if !strings.Contains(list, "id="+id+" ") || !strings.Contains(list, " name=victim ") ||
		!strings.Contains(list, " cmd=client|id ") || !strings.Contains(list, " name=killer ") {
		t.Fatalf("CLIENT LIST:\n%s", list)
	}
	n, err := c.ClientKillByFilter(ctx(t), "ID", id).Result()
	if err != nil || n != 1 {
		t.Fatalf("CLIENT KILL ID %s = %d, %v", id, n, err)
	}
	// The victim's connection is closed: its read ends.
	if b, err := io.ReadAll(vr); err != nil || len(b) > 0 {
		t.Fatalf("killed connection: read %q, %v; want EOF at once", b, err)
	}
	if list := c.ClientList(ctx(t)).Val(); strings.Contains(list, "name=victim") {
		t.Fatalf("killed client still listed:\n%s", list)
	}
	if n := c.ClientKillByFilter(ctx(t), "ID", id).Val(); n != 0 {
		t.Fatalf("killing it again killed %d", n)
	}
	// The killer is unharmed, and the old form reports a missing client.
	if err := c.Do(ctx(t), "CLIENT", "KILL", "127.0.0.1:1").Err(); err == nil || err.Error() != "ERR No such client" {
		t.Fatalf("CLIENT KILL of nobody: %v", err)
	}
}

// Concurrent CLIENT LIST and KILL while other clients run commands: the
// race detector (the binary is built with -race) watches the registry.
func TestClientKillUnderLoad(t *testing.T) {
	s := StartServer(t)
	admin := s.Client()
	done := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			c := s.Client(func(o *redis.Options) { o.PoolSize = 1; o.MaxRetries = 5 })
			for i := range 200 {
				c.Do(ctx(t), "CL.THROTTLE", fmt.Sprintf("load:%d:%d", w, i%10), 100, 10, 60)
			}
		}()
	}
	killed := int64(0)
	for range 20 {
		admin.ClientList(ctx(t))
		n, _ := admin.ClientKillByFilter(ctx(t), "SKIPME", "yes", "TYPE", "normal").Result()
		killed += n
	}
	for range 4 {
		<-done
	}
	if err := admin.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("admin after the kills: %v", err)
	}
	t.Logf("killed %d connections", killed)
}

func TestRedisCLIHelloAndIntrospection(t *testing.T) {
	s := StartServer(t)
	out := redisCLI(t, s.Addr, "-3", "HELLO", "3")
	// Without a terminal redis-cli prints a map's pairs as "key value" lines.
	for _, want := range []string{"server redis\n", "version 7.2.0\n", "proto 3\n", "mode cluster\n", "role master\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("redis-cli -3 HELLO 3 lacks %s:\n%s", want, out)
		}
	}
	if out := redisCLI(t, s.Addr, "CLIENT", "SETINFO", "LIB-NAME", "redis-cli"); out != "OK\n" {
		t.Fatalf("CLIENT SETINFO: %q", out)
	}
	if out := redisCLI(t, s.Addr, "WAIT", "1", "0"); out != "0\n" {
		t.Fatalf("WAIT: %q", out)
	}
	if out := redisCLI(t, s.Addr, "INFO", "cluster"); !strings.Contains(out, "cluster_enabled:1") {
		t.Fatalf("INFO cluster: %q", out)
	}
	if out := redisCLI(t, s.Addr, "COMMAND", "GETKEYS", "CL.THROTTLE", "k", "1", "2", "3"); out != "k\n" {
		t.Fatalf("COMMAND GETKEYS: %q", out)
	}
}
