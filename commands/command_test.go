package commands

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// redisFlags are the command flags Redis 7.2 defines.
var redisFlags = map[string]bool{"write": true, "readonly": true, "denyoom": true, "module": true, "admin": true,
	"pubsub": true, "noscript": true, "blocking": true, "loading": true, "stale": true, "skip_monitor": true,
	"skip_slowlog": true, "asking": true, "fast": true, "no_auth": true, "may_replicate": true, "sentinel": true,
	"only_sentinel": true, "no_mandatory_keys": true, "protected": true, "no_async_loading": true,
	"no_multi": true, "movablekeys": true, "allow_busy": true}

var argTypes = map[string]bool{"key": true, "string": true, "integer": true, "double": true, "pattern": true,
	"unix-time": true, "pure-token": true, "oneof": true, "block": true}

// argWords is the fewest words an argument takes on the command line.
func argWords(a Arg) int {
	n := 0
	if a.Token != "" {
		n = 1
	}
	switch a.Type {
	case "pure-token":
		return 1
	case "block":
		for _, s := range a.Sub {
			if !s.Optional {
				n += argWords(s)
			}
		}
		return n
	case "oneof":
		least := -1
		for _, s := range a.Sub {
			if w := argWords(s); least < 0 || w < least {
				least = w
			}
		}
		return n + least
	}
	return n + 1
}

func checkArgs(t *testing.T, name string, args []Arg) {
	for _, a := range args {
		if !argTypes[a.Type] {
			t.Errorf("%s: argument %q has type %q, not a Redis argument type", name, a.Name, a.Type)
		}
		container := a.Type == "oneof" || a.Type == "block"
		if container != (len(a.Sub) > 0) {
			t.Errorf("%s: argument %q of type %q with %d sub-arguments (redis-cli needs Sub exactly on oneof/block)",
				name, a.Name, a.Type, len(a.Sub))
		}
		if a.Type == "pure-token" && a.Token == "" {
			t.Errorf("%s: pure-token %q has no token", name, a.Name)
		}
		checkArgs(t, name, a.Sub)
	}
}

// Every command's COMMAND metadata agrees with itself: arity with the
// documented arguments, key positions with the key arguments, flags and
// argument types from Redis' vocabulary.
func TestCommandMetadataIsConsistent(t *testing.T) {
	var check func(cmd *Command)
	check = func(cmd *Command) {
		name := cmd.FullName()
		if cmd.Name != strings.ToLower(cmd.Name) || cmd.Arity == 0 {
			t.Errorf("%s: name must be lower case and arity non-zero (arity %d)", name, cmd.Arity)
		}
		if cmd.Summary == "" || cmd.Since == "" || cmd.Group == "" || cmd.Complexity == "" {
			t.Errorf("%s: COMMAND DOCS needs summary, since, group and complexity", name)
		}
		for _, f := range cmd.Flags {
			if !redisFlags[f] {
				t.Errorf("%s: flag %q is not a Redis command flag", name, f)
			}
		}
		if slices.Contains(cmd.Flags, "write") && slices.Contains(cmd.Flags, "readonly") {
			t.Errorf("%s: both write and readonly", name)
		}
		checkArgs(t, name, cmd.Args)
		for _, s := range cmd.Subs {
			check(s)
		}
		if len(cmd.Subs) > 0 {
			return
		}
		words := 1
		if cmd.parent != nil {
			words = 2
		}
		variable := false
		for _, a := range cmd.Args {
			if a.Optional || a.Multiple {
				variable = true
			}
			if !a.Optional {
				words += argWords(a)
			}
		}
		switch {
		case cmd.Arity > 0 && (variable || words != cmd.Arity):
			t.Errorf("%s: arity %d, but its arguments take %d words (variable %v)", name, cmd.Arity, words, variable)
		case cmd.Arity < 0 && words != -cmd.Arity:
			t.Errorf("%s: arity %d, but its required arguments take %d words", name, cmd.Arity, words)
		}
		keyArg := slices.IndexFunc(cmd.Args, func(a Arg) bool { return a.Type == "key" })
		switch {
		case keyArg < 0 && cmd.FirstKey != 0:
			t.Errorf("%s: first key %d but no key argument", name, cmd.FirstKey)
		case keyArg >= 0 && cmd.FirstKey != keyArg+1:
			t.Errorf("%s: first key %d but the key is argument %d", name, cmd.FirstKey, keyArg+1)
		case keyArg >= 0 && (cmd.Step < 1 || cmd.LastKey == 0 || (cmd.LastKey > 0 && cmd.LastKey < cmd.FirstKey)):
			t.Errorf("%s: key positions %d %d %d", name, cmd.FirstKey, cmd.LastKey, cmd.Step)
		}
	}
	for _, cmd := range testEnv().Table.Commands() {
		check(cmd)
	}
}

// The Redis commands answer COMMAND INFO with Redis 7.2's arity and key
// positions (from Redis' command table), which cluster clients route by.
func TestRedisCommandsHaveRedisArity(t *testing.T) {
	want := map[string]string{
		"ping": "-1 0 0 0", "echo": "2 0 0 0", "quit": "-1 0 0 0", "select": "2 0 0 0", "auth": "-2 0 0 0",
		"hello": "-1 0 0 0", "reset": "1 0 0 0", "wait": "3 0 0 0", "del": "-2 1 -1 1", "unlink": "-2 1 -1 1",
		"exists": "-2 1 -1 1", "ttl": "2 1 1 1", "pttl": "2 1 1 1", "type": "2 1 1 1", "get": "2 1 1 1",
		"info": "-1 0 0 0", "dbsize": "1 0 0 0", "flushall": "-1 0 0 0", "flushdb": "-1 0 0 0", "time": "1 0 0 0",
		"command": "-1 0 0 0", "config": "-2 0 0 0", "client": "-2 0 0 0", "cluster": "-2 0 0 0",
		"readonly": "1 0 0 0", "readwrite": "1 0 0 0", "asking": "1 0 0 0", "scan": "-2 0 0 0", "keys": "2 0 0 0",
		"client|id": "2 0 0 0", "client|setname": "3 0 0 0", "client|getname": "2 0 0 0", "client|setinfo": "4 0 0 0",
		"client|info": "2 0 0 0", "client|list": "-2 0 0 0", "client|kill": "-3 0 0 0", "client|no-evict": "3 0 0 0",
		"client|no-touch": "3 0 0 0", "client|getredir": "2 0 0 0", "client|unblock": "-3 0 0 0", "client|help": "2 0 0 0",
		"cluster|info": "2 0 0 0", "cluster|myid": "2 0 0 0", "cluster|myshardid": "2 0 0 0", "cluster|nodes": "2 0 0 0",
		"cluster|slots": "2 0 0 0", "cluster|shards": "2 0 0 0", "cluster|keyslot": "3 0 0 0",
		"cluster|countkeysinslot": "3 0 0 0", "cluster|getkeysinslot": "4 0 0 0", "cluster|help": "2 0 0 0",
		"config|get": "-3 0 0 0", "config|set": "-4 0 0 0", "config|resetstat": "2 0 0 0", "config|rewrite": "2 0 0 0",
		"config|help": "2 0 0 0", "command|count": "2 0 0 0", "command|docs": "-2 0 0 0", "command|getkeys": "-3 0 0 0",
		"command|getkeysandflags": "-3 0 0 0", "command|help": "2 0 0 0", "command|info": "-2 0 0 0",
		"command|list": "-2 0 0 0",
	}
	tbl := testEnv().Table
	for name, w := range want {
		cmd := tbl.lookupFull([]byte(name))
		if cmd == nil {
			t.Errorf("%s is missing", name)
			continue
		}
		if got := fmt.Sprintf("%d %d %d %d", cmd.Arity, cmd.FirstKey, cmd.LastKey, cmd.Step); got != w {
			t.Errorf("%s: arity/first/last/step %s, Redis has %s", name, got, w)
		}
	}
}

func TestCommandInfoShape(t *testing.T) {
	for _, proto := range []int{2, 3} {
		env := fuzzEnv()
		c := testCtx(env)
		c.W.Proto = proto
		v := run(t, c, "COMMAND", "INFO", "cl.throttle", "client|list", "nope")
		if len(v.elems) != 3 || !v.elems[2].null {
			t.Fatalf("RESP%d: COMMAND INFO gave %d entries, last null %v", proto, len(v.elems), v.elems[len(v.elems)-1].null)
		}
		th := v.elems[0]
		if len(th.elems) != 10 || th.elems[0].str != "cl.throttle" || th.elems[1].num != -5 || th.elems[3].num != 1 {
			t.Fatalf("RESP%d: cl.throttle info %+v", proto, th)
		}
		specs := th.elems[8].elems
		if len(specs) != 1 {
			t.Fatalf("RESP%d: %d key specs", proto, len(specs))
		}
		spec := specs[0].asMap()
		if bs := spec["begin_search"].asMap(); bs["type"].str != "index" || bs["spec"].asMap()["index"].num != 1 {
			t.Fatalf("RESP%d: begin_search %+v", proto, bs)
		}
		if cats := th.elems[6].elems; len(cats) == 0 || cats[0].str != "@write" {
			t.Fatalf("RESP%d: ACL categories %+v", proto, cats)
		}
		if proto == 3 && (th.elems[2].kind != '~' || specs[0].kind != '%') {
			t.Fatalf("RESP3 flags should be a set and key specs maps: %c %c", th.elems[2].kind, specs[0].kind)
		}
	}
}

func TestCommandGetKeys(t *testing.T) {
	c := testCtx(fuzzEnv())
	if v := run(t, c, "COMMAND", "GETKEYS", "DEL", "a", "b", "c"); len(v.elems) != 3 || v.elems[2].str != "c" {
		t.Fatalf("GETKEYS DEL = %+v", v)
	}
	if v := run(t, c, "COMMAND", "GETKEYS", "CL.THROTTLE", "k", "1", "2", "3"); len(v.elems) != 1 || v.elems[0].str != "k" {
		t.Fatalf("GETKEYS CL.THROTTLE = %+v", v)
	}
	// Every command with keys names them, movable ones included.
	for _, tc := range []struct {
		args []string
		keys string
	}{
		{[]string{"RL.CHECKALL", "LIMIT", "ka", "GCRA", "1", "1", "1"}, "ka"},
		{[]string{"RL.CHECKALL", "COST", "2", "LIMIT", "ka", "GCRA", "1", "1", "1", "LIMIT", "kb", "FIXED", "1", "1"}, "ka kb"},
		{[]string{"RL.CHECK", "api", "DESCRIPTOR", "u", "v"}, "api"},
		{[]string{"RL.SHOULDRATELIMIT", "api", "1", "1", "-", "-", "-", "u", "v"}, "api"},
		{[]string{"RL.OVERRIDE", "LIST", "api"}, "api"},
		{[]string{"RL.SCALE", "GET", "api"}, "api"},
		{[]string{"SW.CHECK", "s", "1", "1"}, "s"}, {[]string{"FW.CHECK", "f", "1", "1"}, "f"},
		{[]string{"CONC.ACQUIRE", "c", "1", "1", "r"}, "c"}, {[]string{"QUOTA.CHECK", "q", "1", "DAY"}, "q"},
		{[]string{"EXISTS", "a", "b"}, "a b"},
	} {
		v := run(t, c, append([]string{"COMMAND", "GETKEYS"}, tc.args...)...)
		var got []string
		for _, e := range v.elems {
			got = append(got, e.str)
		}
		if strings.Join(got, " ") != tc.keys {
			t.Errorf("GETKEYS %v = %+v, want %s", tc.args, v, tc.keys)
		}
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"NOPE", "x"}, "ERR Invalid command specified"},
		{[]string{"PING", "x"}, "ERR The command has no key arguments"},
		{[]string{"GET", "a", "b"}, "ERR Invalid number of arguments specified for command"},
	} {
		if v := run(t, c, append([]string{"COMMAND", "GETKEYS"}, tc.args...)...); v.kind != '-' || v.str != tc.err {
			t.Errorf("GETKEYS %v = %+v, want %q", tc.args, v, tc.err)
		}
	}
	v := run(t, c, "COMMAND", "GETKEYSANDFLAGS", "DEL", "a")
	if len(v.elems) != 1 || v.elems[0].elems[0].str != "a" || v.elems[0].elems[1].elems[0].str != "RM" {
		t.Fatalf("GETKEYSANDFLAGS DEL = %+v", v)
	}
}

func TestCommandListIncludesSubcommandsAndFilters(t *testing.T) {
	c := testCtx(fuzzEnv())
	names := map[string]bool{}
	for _, e := range run(t, c, "COMMAND", "LIST").elems {
		names[e.str] = true
	}
	for _, n := range []string{"cl.throttle", "client", "client|list", "cluster|slots", "config|get"} {
		if !names[n] {
			t.Errorf("COMMAND LIST lacks %s", n)
		}
	}
	got := run(t, c, "COMMAND", "LIST", "FILTERBY", "PATTERN", "cluster|*")
	if len(got.elems) != len(testEnv().Table.lookupFull([]byte("cluster")).Subs) {
		t.Errorf("FILTERBY PATTERN cluster|* = %d names", len(got.elems))
	}
	if got := run(t, c, "COMMAND", "LIST", "FILTERBY", "ACLCAT", "connection"); !slices.ContainsFunc(got.elems,
		func(v respValue) bool { return v.str == "client|setname" }) {
		t.Errorf("FILTERBY ACLCAT connection lacks client|setname: %+v", got.elems)
	}
	if got := run(t, c, "COMMAND", "LIST", "FILTERBY", "MODULE", "x"); len(got.elems) != 0 {
		t.Errorf("FILTERBY MODULE = %+v", got.elems)
	}
}

// COMMAND DOCS follows Redis: display_text only on value arguments,
// key_spec_index on keys, and every oneof/block has arguments.
func TestCommandDocsArguments(t *testing.T) {
	c := testCtx(fuzzEnv())
	c.W.Proto = 3
	v := run(t, c, "COMMAND", "DOCS", "client")
	client := v.asMap()["client"].asMap()
	kill := client["subcommands"].asMap()["client|kill"].asMap()
	filter := kill["arguments"].elems[0].asMap()
	if filter["type"].str != "oneof" || len(filter["arguments"].elems) != 2 {
		t.Fatalf("client|kill filter %+v", filter)
	}
	if _, ok := filter["display_text"]; ok {
		t.Fatal("a oneof has no display_text in Redis")
	}
	old := filter["arguments"].elems[0].asMap()
	if old["display_text"].str != "ip:port" {
		t.Fatalf("old-format display_text %+v", old["display_text"])
	}
	key := run(t, c, "COMMAND", "DOCS", "cl.throttle").asMap()["cl.throttle"].asMap()["arguments"].elems[0].asMap()
	if key["type"].str != "key" || key["key_spec_index"].num != 0 || key["display_text"].str != "key" {
		t.Fatalf("cl.throttle key doc %+v", key)
	}
}

// run dispatches one command and parses its one reply.
func run(t *testing.T, c *Ctx, args ...string) respValue {
	t.Helper()
	argv := make([][]byte, len(args))
	for i, a := range args {
		argv[i] = []byte(a)
	}
	c.Reset()
	c.W.Buf = c.W.Buf[:0]
	c.Env.Table.Dispatch(c, argv)
	v, n, err := parseRESP(c.W.Buf)
	if err != nil || n != len(c.W.Buf) {
		t.Fatalf("%v: reply %q: %v (%d of %d bytes)", args, c.W.Buf, err, n, len(c.W.Buf))
	}
	return v
}
