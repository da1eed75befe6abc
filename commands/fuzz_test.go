package commands

import (
	"bytes"
	"testing"

	"github.com/sluice-rl/sluice/clock"
)

// fuzzEnv is a real Env (keyspace, table, frozen clock) without a network.
func fuzzEnv() *Env {
	clk := clock.New(nil)
	clk.Freeze(4102444800e9)
	env := newEnv(clk)
	env.Options = Options{Version: "test", Addr: "127.0.0.1:6379", DataDir: "/tmp/sluice-fuzz", LogLevel: "info"}
	env.RunID = "0123456789abcdef0123456789abcdef01234567"
	env.NodeID = "89abcdef0123456789abcdef0123456789abcdef"
	env.Tunables.MaxClients.Store(10000)
	return env
}

// splitFuzzInput turns fuzz bytes into command vectors: commands are
// separated by 0x01, arguments by 0x00. At most 16 commands run per input.
func splitFuzzInput(data []byte) [][][]byte {
	var cmds [][][]byte
	for _, line := range bytes.Split(data, []byte{1}) {
		if len(cmds) == 16 {
			break
		}
		args := bytes.Split(line, []byte{0})
		if len(args) > 64 {
			args = args[:64]
		}
		if len(args[0]) == 0 {
			continue
		}
		cmds = append(cmds, args)
	}
	return cmds
}

func fuzzCmd(words ...string) []byte { return []byte(joinWords(words)) }

func joinWords(words []string) string {
	s := ""
	for i, w := range words {
		if i > 0 {
			s += "\x00"
		}
		s += w
	}
	return s
}

// FuzzDispatch sends random argument vectors through Table.Dispatch against
// a real Env: no command may panic, and each must write exactly one
// well-formed reply, in RESP2 types only unless the connection switched to
// RESP3.
func FuzzDispatch(f *testing.F) {
	for _, seed := range [][]string{
		{"PING"}, {"PING", "hello"}, {"ECHO", "x"}, {"HELLO"}, {"HELLO", "3"}, {"HELLO", "2", "SETNAME", "me"},
		{"HELLO", "3", "AUTH", "default", "pw"}, {"HELLO", "4"}, {"AUTH", "pw"}, {"RESET"}, {"WAIT", "0", "0"},
		{"CL.THROTTLE", "k", "15", "30", "60"}, {"CL.THROTTLE", "k", "15", "30", "60", "0"},
		{"SW.CHECK", "k", "10", "60"}, {"FW.CHECK", "k", "10", "60", "COST", "2"},
		{"CONC.ACQUIRE", "c", "2", "30", "r1"}, {"CONC.RELEASE", "c", "r1"}, {"CONC.GET", "c"},
		{"GET", "k"}, {"DEL", "k", "x"}, {"EXISTS", "k"}, {"TTL", "k"}, {"PTTL", "k"}, {"TYPE", "k"},
		{"SCAN", "0"}, {"SCAN", "0", "MATCH", "k*", "COUNT", "5", "TYPE", "gcra"}, {"KEYS", "*"}, {"KEYS", "[a-"},
		{"DBSIZE"}, {"INFO"}, {"INFO", "all"}, {"TIME"}, {"COMMAND", "COUNT"}, {"COMMAND", "INFO", "get", "nope"},
		{"COMMAND", "DOCS", "client"}, {"COMMAND", "LIST", "FILTERBY", "PATTERN", "cl*"},
		{"COMMAND", "GETKEYS", "CL.THROTTLE", "k", "1", "2", "3"}, {"COMMAND", "GETKEYSANDFLAGS", "DEL", "a", "b"},
		{"CLIENT", "ID"}, {"CLIENT", "SETNAME", "n"}, {"CLIENT", "GETNAME"}, {"CLIENT", "SETINFO", "LIB-NAME", "x"},
		{"CLIENT", "INFO"}, {"CLIENT", "LIST"}, {"CLIENT", "KILL", "ID", "1"}, {"CLIENT", "KILL", "1.2.3.4:5"},
		{"CLIENT", "NO-EVICT", "on"}, {"CLIENT", "HELP"},
		{"CLUSTER", "INFO"}, {"CLUSTER", "SLOTS"}, {"CLUSTER", "SHARDS"}, {"CLUSTER", "NODES"}, {"CLUSTER", "MYID"},
		{"CLUSTER", "KEYSLOT", "{a}b"}, {"CLUSTER", "COUNTKEYSINSLOT", "1"}, {"CLUSTER", "GETKEYSINSLOT", "1", "9"},
		{"READONLY"}, {"READWRITE"}, {"ASKING"},
		{"CONFIG", "GET", "*"}, {"CONFIG", "SET", "maxclients", "10"}, {"CONFIG", "SET", "dir", "/"},
		{"CONFIG", "RESETSTAT"}, {"SELECT", "0"}, {"QUIT"}, {"NOPE", "x"},
		{"RL.RULES", "LOAD", "f.yaml", "domain: d\ndescriptors:\n  - key: u\n    rate_limit: {unit: second, requests_per_unit: 2}\n"},
		{"RL.CHECK", "d", "DESCRIPTOR", "u", "x"}, {"RL.CHECK", "d", "COST", "3", "DESCRIPTOR", "u", "x", "DESCRIPTOR", "u", "x"},
		{"RL.RULES", "LIST"}, {"RL.RULES", "CLEAR"}, {"RL.OVERRIDE", "SET", "d", "5", "minute", "DESCRIPTOR", "u", "x"},
		{"RL.OVERRIDE", "LIST", "d"}, {"RL.OVERRIDE", "DEL", "d", "DESCRIPTOR", "u", "x"}, {"RL.SCALE", "SET", "d", "0.5"},
		{"RL.SCALE", "GET", "d"}, {"RL.CHECKALL", "LIMIT", "{a}1", "GCRA", "1", "2", "3", "LIMIT", "{a}2", "QUOTA", "5", "day"},
	} {
		f.Add(fuzzCmd(seed...))
	}
	f.Add([]byte("HELLO\x003\x01CL.THROTTLE\x00k\x001\x001\x001\x01CLIENT\x00INFO\x01CONFIG\x00GET\x00*"))
	f.Fuzz(func(t *testing.T, data []byte) {
		env := fuzzEnv()
		c := &Ctx{Env: env, Conn: &Conn{ID: 1, Proto: 2, Authenticated: true, Addr: "127.0.0.1:1", LocalAddr: "127.0.0.1:6379"},
			W: &Writer{Proto: 2}}
		for _, args := range splitFuzzInput(data) {
			c.Reset()
			c.W.Buf = c.W.Buf[:0]
			env.Table.Dispatch(c, args)
			v, n, err := parseRESP(c.W.Buf)
			if err != nil {
				t.Fatalf("%q: reply %q: %v", args, c.W.Buf, err)
			}
			if n != len(c.W.Buf) {
				t.Fatalf("%q: %d bytes after the reply in %q", args, len(c.W.Buf)-n, c.W.Buf)
			}
			if c.W.Proto == 2 && resp3Only(v) {
				t.Fatalf("%q: RESP3 type in a RESP2 reply %q", args, c.W.Buf)
			}
			if c.W.Proto != c.Conn.Proto {
				t.Fatalf("%q: writer speaks RESP%d, connection RESP%d", args, c.W.Proto, c.Conn.Proto)
			}
		}
	})
}
