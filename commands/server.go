package commands

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

func serverCommands() []*Command {
	return []*Command{
		{Name: "info", Arity: -1, Flags: []string{"loading", "stale"}, Group: "server", Since: "1.0.0",
			Summary: "Returns information and statistics about the server.", Complexity: "O(1)",
			Args: []Arg{{Name: "section", Type: "string", Optional: true}}, Run: runInfo},
		{Name: "dbsize", Arity: 1, Flags: []string{"readonly", "fast"}, Group: "server", Since: "1.0.0",
			Summary: "Returns the number of keys.", Complexity: "O(1)", Run: runDBSize},
		{Name: "flushall", Arity: -1, Flags: []string{"write"}, Group: "server", Since: "1.0.0",
			Summary: "Removes all keys.", Complexity: "O(N)",
			Args: flushArgs, Run: runFlush},
		{Name: "flushdb", Arity: -1, Flags: []string{"write"}, Group: "server", Since: "1.0.0",
			Summary: "Removes all keys.", Complexity: "O(N)",
			Args: flushArgs, Run: runFlush},
		{Name: "time", Arity: 1, Flags: []string{"loading", "stale", "fast"}, Group: "server", Since: "2.6.0",
			Summary: "Returns the server time (the test clock when it is set).", Complexity: "O(1)", Run: runTime},
		{Name: "debug", Arity: -2, Flags: []string{"admin", "noscript", "loading", "stale"}, Group: "server",
			Since: "1.0.0", Summary: "Test hooks: DEBUG CLOCK SET <unix-ns> | ADVANCE <ns> | GET | REAL, DEBUG GC. Needs --enable-debug-command.",
			Complexity: "O(1)", Run: runDebug},
		commandCommand(),
	}
}

var flushArgs = []Arg{{Name: "flush-type", Type: "oneof", Optional: true, Sub: []Arg{
	{Name: "async", Type: "pure-token", Token: "ASYNC"},
	{Name: "sync", Type: "pure-token", Token: "SYNC"},
}}}

func runDBSize(c *Ctx, _ [][]byte) { c.W.Int(int64(c.Env.Keys.Stats().Keys)) }

func runFlush(c *Ctx, args [][]byte) {
	if len(args) > 2 || (len(args) == 2 && !equalFold(args[1], "sync") && !equalFold(args[1], "async")) {
		c.W.Error(errSyntax)
		return
	}
	c.Env.Keys.Flush()
	c.W.OK()
}

func runTime(c *Ctx, _ [][]byte) {
	now := c.Now()
	c.W.Array(2)
	c.W.BulkString(strconv.FormatInt(now/1e9, 10))
	c.W.BulkString(strconv.FormatInt(now%1e9/1e3, 10))
}

// runDebug is DEBUG CLOCK SET <unix-ns> | ADVANCE <ns> | REAL: the test
// clock end-to-end tests use instead of sleeping.
func runDebug(c *Ctx, args [][]byte) {
	if !c.Env.Options.EnableDebug {
		c.W.Error(errDebugDenied)
		return
	}
	if equalFold(args[1], "gc") && len(args) == 2 {
		// Lets benchmarks measure live memory rather than garbage.
		runtime.GC()
		c.W.OK()
		return
	}
	if !equalFold(args[1], "clock") || len(args) < 3 {
		c.W.Error("ERR DEBUG supports only CLOCK SET <unix-ns> | CLOCK ADVANCE <ns> | CLOCK REAL | CLOCK GET")
		return
	}
	clk := c.Env.Clock
	switch {
	case equalFold(args[2], "set") && len(args) == 4:
		ns, ok := parseInt(args[3])
		if !ok || ns <= 0 {
			c.W.Error(errNotInteger)
			return
		}
		clk.Freeze(ns)
		c.W.Int(clk.Now())
	case equalFold(args[2], "advance") && len(args) == 4:
		ns, ok := parseInt(args[3])
		if !ok || ns < 0 {
			c.W.Error(errNotInteger)
			return
		}
		c.W.Int(clk.Advance(ns))
	case equalFold(args[2], "real") && len(args) == 3:
		clk.Release()
		c.W.OK()
	case equalFold(args[2], "get") && len(args) == 3:
		c.W.Int(clk.Now())
	default:
		c.W.Error(errSyntax)
	}
}

// infoSections are INFO's sections in the order Redis prints them.
var infoSections = []string{"server", "clients", "memory", "persistence", "stats", "replication", "cpu", "cluster", "keyspace"}

func runInfo(c *Ctx, args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[lower(a)] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	var b strings.Builder
	for _, name := range infoSections {
		if !all && !want[name] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "# %s\r\n", strings.ToUpper(name[:1])+name[1:])
		for _, f := range c.infoSection(name) {
			b.WriteString(f[0])
			b.WriteByte(':')
			b.WriteString(f[1])
			b.WriteString("\r\n")
		}
	}
	c.W.Verbatim(b.String())
}

func (c *Ctx) infoSection(name string) [][2]string {
	e := c.Env
	now := c.Now()
	switch name {
	case "server":
		port := e.Options.Addr
		if i := strings.LastIndexByte(port, ':'); i >= 0 {
			port = port[i+1:]
		}
		up := (now - e.Started) / 1e9
		return [][2]string{
			{"redis_version", RedisVersion},
			{"sluice_version", e.Options.Version},
			{"redis_mode", e.mode()},
			{"os", runtime.GOOS},
			{"arch_bits", strconv.Itoa(strconv.IntSize)},
			{"go_version", runtime.Version()},
			{"process_id", strconv.Itoa(os.Getpid())},
			{"run_id", e.RunID},
			{"tcp_port", port},
			{"server_time_usec", itoa(now / 1e3)},
			{"uptime_in_seconds", itoa(up)},
			{"uptime_in_days", itoa(up / 86400)},
			{"executable", executable()},
			{"config_file", ""},
		}
	case "clients":
		return [][2]string{
			{"connected_clients", itoa(e.Stats.ConnectedClients.Load())},
			{"maxclients", strconv.Itoa(e.Options.MaxClients)},
			{"blocked_clients", "0"},
		}
	case "memory":
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		st := e.Keys.Stats()
		return [][2]string{
			{"used_memory", strconv.FormatUint(m.HeapAlloc, 10)},
			{"used_memory_human", humanBytes(m.HeapAlloc)},
			{"used_memory_rss", strconv.FormatUint(m.Sys, 10)},
			{"used_memory_rss_human", humanBytes(m.Sys)},
			{"used_memory_keyspace", strconv.Itoa(st.Bytes)},
			{"maxmemory", "0"},
			{"maxmemory_policy", "noeviction"},
		}
	case "persistence":
		return [][2]string{{"loading", "0"}, {"async_loading", "0"}}
	case "stats":
		return [][2]string{
			{"total_connections_received", itoa(e.Stats.ConnectionsReceived.Load())},
			{"total_commands_processed", itoa(e.Stats.CommandsProcessed.Load())},
			{"rejected_connections", itoa(e.Stats.ConnectionsRejected.Load())},
			{"expired_keys", itoa(e.Stats.ExpiredKeys.Load())},
			{"total_net_input_bytes", itoa(e.Stats.NetInputBytes.Load())},
			{"total_net_output_bytes", itoa(e.Stats.NetOutputBytes.Load())},
			{"limited_requests", itoa(e.Table.limitedTotal())},
		}
	case "replication":
		return [][2]string{{"role", "master"}, {"connected_slaves", "0"}}
	case "cpu":
		return nil
	case "cluster":
		return [][2]string{{"cluster_enabled", "0"}}
	case "keyspace":
		st := e.Keys.Stats()
		if st.Keys == 0 {
			return nil
		}
		return [][2]string{{"db0", fmt.Sprintf("keys=%d,expires=%d,avg_ttl=0", st.Keys, st.Keys)}}
	}
	return nil
}

func (t *Table) limitedTotal() int64 {
	var n int64
	for _, c := range t.sorted {
		n += c.Limited()
	}
	return n
}

func executable() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	return p
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
