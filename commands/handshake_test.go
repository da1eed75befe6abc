package commands

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/slot"
)

func TestHelloRESP3AndBack(t *testing.T) {
	c := testCtx(fuzzEnv())
	c.Conn.ID = 7
	v := run(t, c, "HELLO", "3", "SETNAME", "app")
	if v.kind != '%' {
		t.Fatalf("HELLO 3 reply is %c, want a RESP3 map", v.kind)
	}
	m := v.asMap()
	if len(v.elems) != 14 || m["server"].str != "redis" || m["version"].str != RedisVersion || m["proto"].num != 3 ||
		m["id"].num != 7 || m["mode"].str != "cluster" || m["role"].str != "master" || m["modules"].kind != '*' {
		t.Fatalf("HELLO 3 = %+v", m)
	}
	if c.Conn.Name != "app" || c.W.Proto != 3 {
		t.Fatalf("name %q proto %d", c.Conn.Name, c.W.Proto)
	}
	if v := run(t, c, "GET", "missing"); v.kind != '_' {
		t.Fatalf("RESP3 null is %c", v.kind)
	}
	if v := run(t, c, "CL.THROTTLE", "k", "1", "1", "1"); v.kind != '*' || len(v.elems) != 5 {
		t.Fatalf("limiter reply under RESP3 = %+v", v)
	}
	if v := run(t, c, "CONFIG", "GET", "maxclients"); v.kind != '%' || v.asMap()["maxclients"].str != "10000" {
		t.Fatalf("CONFIG GET under RESP3 = %+v", v)
	}
	if v := run(t, c, "HELLO"); v.asMap()["proto"].num != 3 {
		t.Fatal("HELLO without a version keeps the protocol")
	}
	v = run(t, c, "HELLO", "2")
	if v.kind != '*' || len(v.elems) != 14 || v.asMap()["proto"].num != 2 {
		t.Fatalf("HELLO 2 = %+v", v)
	}
	if v := run(t, c, "GET", "missing"); v.kind != '$' || !v.null {
		t.Fatalf("RESP2 null = %+v", v)
	}
}

func TestHelloErrors(t *testing.T) {
	env := fuzzEnv()
	env.Options.RequirePass = "pw"
	c := testCtx(env)
	c.Conn.Authenticated = false
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"HELLO", "1"}, "NOPROTO unsupported protocol version"},
		{[]string{"HELLO", "4"}, "NOPROTO unsupported protocol version"},
		{[]string{"HELLO", "x"}, "ERR Protocol version is not an integer or out of range"},
		{[]string{"HELLO", "3", "BOGUS"}, "ERR Syntax error in HELLO option 'BOGUS'"},
		{[]string{"HELLO", "3", "SETNAME", "a b"}, errClientName},
		{[]string{"HELLO", "3", "AUTH", "default", "wrong"}, errWrongPass},
		{[]string{"HELLO", "3"}, "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"},
		{[]string{"PING"}, errNoAuth},
	} {
		if v := run(t, c, tc.args...); v.kind != '-' || v.str != tc.want {
			t.Errorf("%v = %c%s, want -%s", tc.args, v.kind, v.str, tc.want)
		}
	}
	if c.W.Proto != 2 {
		t.Fatal("a failed HELLO switched the protocol")
	}
	if v := run(t, c, "HELLO", "3", "AUTH", "default", "pw"); v.kind != '%' || !c.Conn.Authenticated {
		t.Fatalf("HELLO 3 AUTH = %+v", v)
	}
	// RESET: back to RESP2, unnamed, and unauthenticated since a password is set.
	run(t, c, "CLIENT", "SETNAME", "x")
	if v := run(t, c, "RESET"); v.kind != '+' || v.str != "RESET" || c.W.Proto != 2 || c.Conn.Name != "" || c.Conn.Authenticated {
		t.Fatalf("RESET = %+v, proto %d, name %q, auth %v", v, c.W.Proto, c.Conn.Name, c.Conn.Authenticated)
	}
}

func TestClientCommandsWithoutRegistry(t *testing.T) {
	c := testCtx(fuzzEnv())
	c.Conn.ID, c.Conn.Addr, c.Conn.LocalAddr = 12, "10.0.0.1:5000", "10.0.0.2:6379"
	if v := run(t, c, "CLIENT", "ID"); v.num != 12 {
		t.Fatalf("CLIENT ID = %+v", v)
	}
	if v := run(t, c, "CLIENT", "GETNAME"); !v.null {
		t.Fatalf("GETNAME before SETNAME = %+v", v)
	}
	run(t, c, "CLIENT", "SETNAME", "worker-1")
	run(t, c, "CLIENT", "SETINFO", "LIB-NAME", "go-redis(,go1.26)")
	run(t, c, "CLIENT", "SETINFO", "lib-ver", "9.23.0")
	run(t, c, "READONLY")
	if v := run(t, c, "CLIENT", "SETINFO", "LIB-NAME", "has space"); v.str != "ERR LIB-NAME cannot contain spaces, newlines or special characters." {
		t.Fatalf("bad lib-name = %+v", v)
	}
	if v := run(t, c, "CLIENT", "SETINFO", "other", "x"); v.str != "ERR Unrecognized option 'other'" {
		t.Fatalf("unknown attr = %+v", v)
	}
	line := run(t, c, "CLIENT", "INFO").str
	for _, field := range []string{"id=12 ", "addr=10.0.0.1:5000 ", "laddr=10.0.0.2:6379 ", " name=worker-1 ",
		" flags=r ", " cmd=client|info ", " user=default ", " resp=2 ", " lib-name=go-redis(,go1.26) ", " lib-ver=9.23.0\n"} {
		if !strings.Contains(line, field) {
			t.Errorf("CLIENT INFO %q lacks %q", line, field)
		}
	}
	if got := strings.Count(line, "="); got != 30 {
		t.Errorf("CLIENT INFO has %d fields, Redis 7.2 has 30: %q", got, line)
	}
	if v := run(t, c, "CLIENT", "LIST", "TYPE", "pubsub"); v.str != "" {
		t.Errorf("CLIENT LIST TYPE pubsub = %q", v.str)
	}
	if v := run(t, c, "CLIENT", "LIST", "TYPE", "bogus"); v.str != "ERR Unknown client type 'bogus'" {
		t.Errorf("bad type = %+v", v)
	}
	if v := run(t, c, "CLIENT", "KILL", "ID", "99"); v.num != 0 {
		t.Errorf("KILL ID 99 = %+v", v)
	}
	if v := run(t, c, "CLIENT", "KILL", "1.2.3.4:5"); v.str != "ERR No such client" {
		t.Errorf("old-form KILL of nobody = %+v", v)
	}
	if c.Conn.Close {
		t.Fatal("killing someone else closed the caller")
	}
	if v := run(t, c, "CLIENT", "KILL", "ID", "12"); v.num != 0 || c.Conn.Close {
		t.Errorf("KILL of self with SKIPME yes (the default) = %+v, close %v", v, c.Conn.Close)
	}
	if v := run(t, c, "CLIENT", "KILL", "ID", "12", "SKIPME", "no"); v.num != 1 || !c.Conn.Close {
		t.Errorf("KILL of self with SKIPME no = %+v, close %v", v, c.Conn.Close)
	}
}

type fakeClients struct {
	list   []ClientInfo
	killed []int64
}

func (f *fakeClients) List() []ClientInfo { return f.list }
func (f *fakeClients) Kill(match func(*ClientInfo) bool) int {
	n := 0
	for i := range f.list {
		if match(&f.list[i]) {
			f.killed = append(f.killed, f.list[i].ID)
			n++
		}
	}
	return n
}

func TestClientListAndKillThroughTheRegistry(t *testing.T) {
	env := fuzzEnv()
	reg := &fakeClients{list: []ClientInfo{
		{ID: 1, Addr: "127.0.0.1:1", LocalAddr: "127.0.0.1:6379", FD: 9, Age: 5, Idle: 2, LastCmd: "cl.throttle", Proto: 3},
		{ID: 2, Addr: "127.0.0.1:2", LocalAddr: "127.0.0.1:6379", FD: 10, LastCmd: "NULL", Proto: 2},
	}}
	env.Clients = reg
	c := testCtx(env)
	c.Conn.ID = 2
	list := run(t, c, "CLIENT", "LIST").str
	lines := strings.Split(strings.TrimSuffix(list, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "id=1 addr=127.0.0.1:1 laddr=127.0.0.1:6379 fd=9 name= age=5 idle=2 flags=N ") ||
		!strings.Contains(lines[0], " cmd=cl.throttle ") || !strings.Contains(lines[1], " cmd=client|list ") {
		t.Fatalf("CLIENT LIST:\n%s", list)
	}
	if got := run(t, c, "CLIENT", "LIST", "ID", "1").str; strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "id=1 ") {
		t.Fatalf("CLIENT LIST ID 1 = %q", got)
	}
	if v := run(t, c, "CLIENT", "KILL", "ADDR", "127.0.0.1:1"); v.num != 1 || fmt.Sprint(reg.killed) != "[1]" {
		t.Fatalf("KILL ADDR = %+v, killed %v", v, reg.killed)
	}
	if v := run(t, c, "CLIENT", "KILL", "LADDR", "127.0.0.1:6379", "SKIPME", "yes"); v.num != 1 || fmt.Sprint(reg.killed) != "[1 1]" {
		t.Fatalf("KILL LADDR = %+v, killed %v (the caller must be skipped)", v, reg.killed)
	}
	if v := run(t, c, "CLIENT", "KILL", "USER", "bob"); v.str != "ERR No such user 'bob'" {
		t.Fatalf("KILL USER bob = %+v", v)
	}
}

func TestClusterReplies(t *testing.T) {
	env := fuzzEnv()
	env.Options.Addr = "0.0.0.0:7000"
	c := testCtx(env)
	c.Conn.LocalAddr = "10.1.2.3:7000"
	slots := run(t, c, "CLUSTER", "SLOTS")
	if len(slots.elems) != 1 {
		t.Fatalf("CLUSTER SLOTS = %+v", slots)
	}
	r := slots.elems[0].elems
	if r[0].num != 0 || r[1].num != 16383 || r[2].elems[0].str != "10.1.2.3" || r[2].elems[1].num != 7000 ||
		r[2].elems[2].str != env.NodeID || len(r[2].elems) != 4 {
		t.Fatalf("slot range %+v: a wildcard listener announces the address the client reached", r)
	}
	env.Options.AdvertiseAddr = "sluice.example:6380"
	nodes := run(t, c, "CLUSTER", "NODES").str
	if want := env.NodeID + " sluice.example:6380@16380 myself,master - 0 0 1 connected 0-16383\n"; nodes != want {
		t.Fatalf("CLUSTER NODES = %q, want %q", nodes, want)
	}
	sh := run(t, c, "CLUSTER", "SHARDS").elems[0].asMap()
	node := sh["nodes"].elems[0].asMap()
	if sh["slots"].elems[1].num != 16383 || node["id"].str != env.NodeID || node["port"].num != 6380 ||
		node["endpoint"].str != "sluice.example" || node["health"].str != "online" || node["role"].str != "master" {
		t.Fatalf("CLUSTER SHARDS = %+v", sh)
	}
	if info := run(t, c, "CLUSTER", "INFO").str; !strings.HasPrefix(info, "cluster_state:ok\r\ncluster_slots_assigned:16384\r\n") {
		t.Fatalf("CLUSTER INFO = %q", info)
	}
	if v := run(t, c, "CLUSTER", "KEYSLOT", "{user1000}.following"); v.num != 3443 {
		t.Fatalf("KEYSLOT = %+v", v)
	}
	if v := run(t, c, "CLUSTER", "MYSHARDID"); v.str != cluster.ShardID(env.NodeID) {
		t.Fatalf("MYSHARDID = %+v", v)
	}
	for _, k := range []string{"{t}a", "{t}b", "{t}c"} {
		run(t, c, "CL.THROTTLE", k, "5", "1", "60")
	}
	slot := fmt.Sprint(slot.Of([]byte("t")))
	if v := run(t, c, "CLUSTER", "COUNTKEYSINSLOT", slot); v.num != 3 {
		t.Fatalf("COUNTKEYSINSLOT = %+v", v)
	}
	if v := run(t, c, "CLUSTER", "GETKEYSINSLOT", slot, "2"); len(v.elems) != 2 || v.elems[0].str != "{t}a" {
		t.Fatalf("GETKEYSINSLOT = %+v", v)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", "16384"}, "ERR Invalid slot"},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", "x"}, errNotInteger},
		{[]string{"CLUSTER", "GETKEYSINSLOT", "1", "-1"}, "ERR Invalid slot or number of keys"},
		{[]string{"CLUSTER", "ADDSLOTS", "1"}, "ERR unknown subcommand 'ADDSLOTS'. Try CLUSTER HELP."},
	} {
		if v := run(t, c, tc.args...); v.str != tc.want {
			t.Errorf("%v = %q, want %q", tc.args, v.str, tc.want)
		}
	}
}

func TestInfoSections(t *testing.T) {
	c := testCtx(fuzzEnv())
	info := run(t, c, "INFO").str
	for _, want := range []string{"# Server\r\nredis_version:7.2.0\r\n", "redis_mode:cluster\r\n", "\r\n\r\n# Clients\r\n",
		"loading:0\r\n", "# Cluster\r\ncluster_enabled:1\r\n", "# Keyspace\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q", want)
		}
	}
	if strings.Contains(info, "# Commandstats") {
		t.Error("commandstats is not a default section")
	}
	if got := run(t, c, "INFO", "CLUSTER", "persistence").str; !strings.HasPrefix(got, "# Persistence\r\n") || !strings.Contains(got, "\r\n\r\n# Cluster\r\n") {
		t.Errorf("INFO cluster persistence = %q (sections come in Redis' order)", got)
	}
	run(t, c, "PING")
	if got := run(t, c, "INFO", "commandstats").str; !strings.Contains(got, "cmdstat_ping:calls=1,") {
		t.Errorf("commandstats = %q", got)
	}
}

func TestConfigGetSet(t *testing.T) {
	env := fuzzEnv()
	c := testCtx(env)
	m := run(t, c, "CONFIG", "GET", "maxclients", "time*", "port").asMap()
	if len(m) != 3 || m["maxclients"].str != "10000" || m["timeout"].str != "0" || m["port"].str != "6379" {
		t.Fatalf("CONFIG GET = %+v", m)
	}
	if v := run(t, c, "CONFIG", "SET", "maxclients", "50", "timeout", "300"); v.str != "OK" ||
		env.Tunables.MaxClients.Load() != 50 || env.Tunables.IdleTimeoutSeconds.Load() != 300 {
		t.Fatalf("CONFIG SET = %+v, maxclients %d, timeout %d", v, env.Tunables.MaxClients.Load(), env.Tunables.IdleTimeoutSeconds.Load())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"maxclients", "0"}, "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 4294967295 inclusive"},
		{[]string{"maxclients", "x"}, "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer"},
		{[]string{"dir", "/"}, "ERR CONFIG SET failed (possibly related to argument 'dir') - can't set immutable config"},
		{[]string{"nope", "1"}, "ERR Unknown option or number of arguments for CONFIG SET - 'nope'"},
		{[]string{"timeout", "1", "timeout", "2"}, "ERR CONFIG SET failed (possibly related to argument 'timeout') - duplicate parameter"},
		// All or nothing: the valid maxclients is not applied either.
		{[]string{"maxclients", "7", "timeout", "-1"}, "ERR CONFIG SET failed (possibly related to argument 'timeout') - argument must be between 0 and 2147483647 inclusive"},
		{[]string{"maxclients", "7", "timeout"}, "ERR wrong number of arguments for 'config|set' command"},
	} {
		if v := run(t, c, append([]string{"CONFIG", "SET"}, tc.args...)...); v.str != tc.want {
			t.Errorf("CONFIG SET %v = %q, want %q", tc.args, v.str, tc.want)
		}
	}
	if env.Tunables.MaxClients.Load() != 50 {
		t.Fatal("a failed CONFIG SET changed maxclients")
	}
	env.Stats.ExpiredKeys.Store(9)
	if v := run(t, c, "CONFIG", "RESETSTAT"); v.str != "OK" || env.Stats.ExpiredKeys.Load() != 0 {
		t.Fatal("RESETSTAT kept the counters")
	}
}

func TestWait(t *testing.T) {
	c := testCtx(fuzzEnv())
	if v := run(t, c, "WAIT", "1", "0"); v.kind != ':' || v.num != 0 {
		t.Fatalf("WAIT = %+v", v)
	}
	if v := run(t, c, "WAIT", "1", "-1"); v.str != "ERR timeout is negative" {
		t.Fatalf("WAIT negative = %+v", v)
	}
}
