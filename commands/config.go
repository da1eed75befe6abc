package commands

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/internal/memsize"
)

// Tunables are the settings CONFIG SET may change while the server runs.
// The server stores the start-up values and reads them where they apply.
type Tunables struct {
	// MaxClients bounds the connections served at once.
	MaxClients atomic.Int64
	// IdleTimeoutSeconds closes connections idle this long (0 = never).
	IdleTimeoutSeconds atomic.Int64
	// MaxMemory is maxmemory in bytes (0: no limit): over it, commands
	// that would store more answer OOM (see Env.refusedOOM).
	MaxMemory atomic.Int64
	// MaxMemoryClients is maxmemory-clients in bytes (0: the default, see
	// Env.MaxMemoryClients): past it the client with the largest buffers is
	// closed.
	MaxMemoryClients atomic.Int64
	// FitClients, when set, makes room for want clients in the process'
	// open-files limit (raising it if it can) and returns how many fit;
	// CONFIG SET maxclients refuses more, as Redis does. Set once before
	// serving.
	FitClients func(want int64) int64
}

// configParam is one CONFIG GET/SET parameter. get is read under no lock:
// it reads immutable Options or atomics. set is nil for a parameter that
// cannot change at run time; otherwise it validates v and returns the
// change to apply (CONFIG SET applies nothing unless every value is valid)
// or Redis' reason for refusing.
type configParam struct {
	name string
	get  func(e *Env) string
	set  func(e *Env, v []byte) (apply func(), reason string)
}

func constParam(name, value string) configParam {
	return configParam{name: name, get: func(*Env) string { return value }}
}

// intSetter parses v as Redis does for a bounded integer parameter.
func intSetter(lo, hi int64, store func(e *Env, n int64)) func(e *Env, v []byte) (func(), string) {
	return func(e *Env, v []byte) (func(), string) {
		n, ok := parseInt(v)
		if !ok {
			return nil, "argument couldn't be parsed into an integer"
		}
		if n < lo || n > hi {
			return nil, "argument must be between " + itoa(lo) + " and " + itoa(hi) + " inclusive"
		}
		return func() { store(e, n) }, ""
	}
}

// memorySetter parses v as a memory size (bytes, or with k, kb, m, mb, g,
// gb) as Redis does for maxmemory.
func memorySetter(store func(e *Env, n int64)) func(e *Env, v []byte) (func(), string) {
	return func(e *Env, v []byte) (func(), string) {
		n, ok := memsize.Parse(string(v))
		if !ok {
			return nil, "argument must be a memory value"
		}
		return func() { store(e, n) }, ""
	}
}

// setMaxClients takes a new maxclients only if the open-files limit holds
// it (raised if it can be), with Redis' reason otherwise: CONFIG GET then
// reports what is in force.
func setMaxClients(e *Env, v []byte) (func(), string) {
	apply, reason := intSetter(1, 4294967295, func(e *Env, n int64) { e.Tunables.MaxClients.Store(n) })(e, v)
	if apply == nil || e.Tunables.FitClients == nil {
		return apply, reason
	}
	n, _ := parseInt(v)
	if fit := e.Tunables.FitClients(n); fit < n {
		return nil, "The operating system is not able to handle the specified number of clients, try with " + itoa(fit)
	}
	return apply, ""
}

// configParams are the parameters sluice has, in the order CONFIG GET
// lists them: its own settings, then the Redis ones clients probe, with
// the values that describe sluice.
var configParams = []configParam{
	{name: "bind", get: func(e *Env) string { h, _, _ := net.SplitHostPort(e.Options.Addr); return h }},
	{name: "port", get: func(e *Env) string { _, p, _ := net.SplitHostPort(e.Options.Addr); return p }},
	{name: "dir", get: func(e *Env) string {
		if abs, err := filepath.Abs(e.Options.DataDir); err == nil {
			return abs
		}
		return e.Options.DataDir
	}},
	{name: "requirepass", get: func(e *Env) string { return e.Options.RequirePass }},
	{name: "loglevel", get: func(e *Env) string { return e.Options.LogLevel }},
	{name: "maxclients", get: func(e *Env) string { return itoa(e.Tunables.MaxClients.Load()) }, set: setMaxClients},
	{name: "timeout", get: func(e *Env) string { return itoa(e.Tunables.IdleTimeoutSeconds.Load()) },
		set: intSetter(0, 2147483647, func(e *Env, n int64) { e.Tunables.IdleTimeoutSeconds.Store(n) })},
	{name: "advertise-addr", get: func(e *Env) string { return e.Options.AdvertiseAddr }},
	{name: "protected-mode", get: func(e *Env) string { return yesNo(e.Options.ProtectedMode) }},
	{name: "proto-max-bulk-len", get: func(e *Env) string { return itoa(e.Options.ProtoMaxBulkLen) }},
	{name: "client-output-buffer-limit", get: func(e *Env) string {
		// Redis' format: class hard soft soft-seconds; sluice has one hard
		// limit for every client.
		return "normal " + strconv.Itoa(e.Options.OutputBufferLimit) + " 0 0 replica 0 0 0 pubsub 0 0 0"
	}},
	constParam("cluster-enabled", "yes"),
	// A group without a leader fails only the commands for its slots; the
	// others go on (Redis' setting of that name, fixed here).
	constParam("cluster-require-full-coverage", "no"),
	constParam("databases", "1"),
	{name: "maxmemory", get: func(e *Env) string { return itoa(e.Tunables.MaxMemory.Load()) },
		set: memorySetter(func(e *Env, n int64) { e.Tunables.MaxMemory.Store(n) })},
	{name: "maxmemory-clients", get: func(e *Env) string { return itoa(e.Tunables.MaxMemoryClients.Load()) },
		set: memorySetter(func(e *Env, n int64) { e.Tunables.MaxMemoryClients.Store(n) })},
	{name: "maxmemory-policy", get: func(*Env) string { return "noeviction" }, set: func(_ *Env, v []byte) (func(), string) {
		if strings.EqualFold(string(v), "noeviction") {
			return func() {}, ""
		}
		return nil, "sluice never evicts a counter: the only policy is noeviction"
	}},
	constParam("appendonly", "no"),
	constParam("save", ""),
	constParam("notify-keyspace-events", ""),
}

func configCommand() *Command {
	flags := []string{"admin", "noscript", "loading", "stale"}
	sub := func(name string, arity int, summary string, run func(*Ctx, [][]byte), args ...Arg) *Command {
		return &Command{Spec: cmdspec.Spec{Name: name, Arity: arity, Flags: flags, Group: "server", Since: "2.0.0",
			Summary: summary, Complexity: "O(N) when N is the number of configuration parameters provided",
			Args: args}, Run: run}
	}
	help := sub("help", 2, "Returns helpful text about the different subcommands.", runConfigHelp)
	help.Flags = []string{"loading", "stale"}
	return &Command{Spec: cmdspec.Spec{Name: "config", Arity: -2, Group: "server", Since: "2.0.0",
		Summary: "A container for server configuration commands.", Complexity: "Depends on subcommand."}, Subs: []*Command{
		sub("get", -3, "Returns the effective values of configuration parameters.", runConfigGet,
			Arg{Name: "parameter", Type: "string", Multiple: true}),
		sub("set", -4, "Sets configuration parameters in-flight (maxclients, timeout, maxmemory, maxmemory-clients; others are immutable).", runConfigSet,
			Arg{Name: "data", Type: "block", Multiple: true, Sub: []Arg{
				{Name: "parameter", Type: "string"}, {Name: "value", Type: "string"}}}),
		sub("resetstat", 2, "Resets the server's statistics.", runConfigResetStat),
		sub("rewrite", 2, "Persists the effective configuration to file (sluice has no config file).",
			func(c *Ctx, _ [][]byte) { c.W.Error("ERR The server is running without a config file") }),
		help,
	}}
}

// runConfigGet is CONFIG GET pattern [pattern …]: a map of every parameter
// any pattern matches, each once.
func runConfigGet(c *Ctx, args [][]byte) {
	matched := make([]bool, len(configParams))
	n := 0
	for _, a := range args[2:] {
		if len(a) > MaxPatternLen {
			c.W.Error(errPatternTooLong)
			return
		}
	}
	for _, a := range args[2:] {
		g, _ := compileGlob([]byte(strings.ToLower(string(a))))
		for i, p := range configParams {
			if !matched[i] && g.match([]byte(p.name)) {
				matched[i] = true
				n++
			}
		}
	}
	c.W.Map(n)
	for i, p := range configParams {
		if matched[i] {
			c.W.BulkString(p.name)
			c.W.BulkString(p.get(c.Env))
		}
	}
}

// runConfigSet is CONFIG SET parameter value [parameter value …]: all or
// nothing, with Redis' errors.
func runConfigSet(c *Ctx, args [][]byte) {
	if len(args)%2 != 0 {
		c.W.Error(errArity("config|set"))
		return
	}
	var applies []func()
	seen := map[string]bool{}
	for i := 2; i < len(args); i += 2 {
		name := lower(args[i])
		var p *configParam
		for j := range configParams {
			if configParams[j].name == name {
				p = &configParams[j]
			}
		}
		fail := func(reason string) {
			c.W.Error("ERR CONFIG SET failed (possibly related to argument '" + clip(args[i], 128) + "') - " + reason)
		}
		switch {
		case p == nil:
			c.W.Error("ERR Unknown option or number of arguments for CONFIG SET - '" + clip(args[i], 128) + "'")
			return
		case seen[name]:
			fail("duplicate parameter")
			return
		case p.set == nil:
			fail("can't set immutable config")
			return
		}
		seen[name] = true
		apply, reason := p.set(c.Env, args[i+1])
		if apply == nil {
			fail(reason)
			return
		}
		applies = append(applies, apply)
	}
	for _, apply := range applies {
		apply()
	}
	c.W.OK()
}

// runConfigResetStat zeroes the counters INFO stats, INFO commandstats and
// the metrics endpoint report (Prometheus treats it as a counter reset).
func runConfigResetStat(c *Ctx, _ [][]byte) {
	st := c.Env.Stats
	st.ConnectionsReceived.Store(0)
	st.ConnectionsRejected.Store(0)
	st.ExpiredKeys.Store(0)
	st.NetInputBytes.Store(0)
	st.NetOutputBytes.Store(0)
	st.Rules.reset()
	for _, cmd := range c.Env.Table.Commands() {
		cmd.resetStats()
		for _, s := range cmd.Subs {
			s.resetStats()
		}
	}
	c.W.OK()
}

func (c *Command) resetStats() {
	c.calls.Store(0)
	c.limits.Store(0)
	c.allowed.Store(0)
	c.lat.reset()
}

func runConfigHelp(c *Ctx, _ [][]byte) {
	c.W.BulkStrings([]string{"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
		"SET <directive> <value>", "    Set the configuration <directive> to <value> (maxclients, timeout).",
		"RESETSTAT", "    Reset statistics reported by the INFO command.",
		"REWRITE", "    Not supported: sluice is configured by flags.",
		"HELP", "    Print this help."})
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
