package commands

import (
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/internal/secret"
)

func connectionCommands() []*Command {
	return []*Command{
		{Spec: cmdspec.Spec{Name: "ping", Arity: -1, Flags: []string{"fast"}, Group: "connection", Since: "1.0.0",
			Summary: "Returns the server's liveliness response.", Complexity: "O(1)",
			Args: []Arg{{Name: "message", Type: "string", Optional: true}}, Tips: []string{"request_policy:all_shards", "response_policy:all_succeeded"}}, Run: runPing},
		{Spec: cmdspec.Spec{Name: "echo", Arity: 2, Flags: []string{"fast"}, Group: "connection", Since: "1.0.0",
			Summary: "Returns the given string.", Complexity: "O(1)",
			Args: []Arg{{Name: "message", Type: "string"}}}, Run: runEcho},
		{Spec: cmdspec.Spec{Name: "quit", Arity: -1, Flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"},
			Group: "connection", Since: "1.0.0", Summary: "Closes the connection.", Complexity: "O(1)"}, NoAuth: true, Run: runQuit},
		{Spec: cmdspec.Spec{Name: "select", Arity: 2, Flags: []string{"loading", "stale", "fast"}, Group: "connection", Since: "1.0.0",
			Summary: "Changes the selected database (sluice has only database 0).", Complexity: "O(1)",
			Args: []Arg{{Name: "index", Type: "integer"}}}, Run: runSelect},
		{Spec: cmdspec.Spec{Name: "auth", Arity: -2, Flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"},
			Group: "connection", Since: "1.0.0", Summary: "Authenticates the connection.", Complexity: "O(N)",
			Args: []Arg{{Name: "username", Type: "string", Optional: true}, {Name: "password", Type: "string"}}}, NoAuth: true, Run: runAuth},
		{Spec: cmdspec.Spec{Name: "hello", Arity: -1, Flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"},
			Group: "connection", Since: "6.0.0", Summary: "Handshakes with the server: protocol, authentication, name.",
			Complexity: "O(1)", Args: []Arg{{Name: "protover", Type: "integer", Optional: true},
				{Name: "auth", Type: "block", Token: "AUTH", Optional: true, Sub: []Arg{
					{Name: "username", Type: "string"}, {Name: "password", Type: "string"}}},
				{Name: "clientname", Type: "string", Token: "SETNAME", Optional: true}}}, NoAuth: true, Run: runHello},
		{Spec: cmdspec.Spec{Name: "reset", Arity: 1, Flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"},
			Group: "connection", Since: "6.2.0", Summary: "Resets the connection.", Complexity: "O(1)"}, NoAuth: true, Run: runReset},
		{Spec: cmdspec.Spec{Name: "wait", Arity: 3, Flags: []string{"noscript"}, Group: "generic", Since: "3.0.0",
			Summary:    "Waits for writes to be acknowledged by replicas (a single node has none: 0 at once).",
			Complexity: "O(1)", Tips: []string{"request_policy:all_shards", "response_policy:agg_min"},
			ACLCategories: []string{"@connection"}, Args: []Arg{{Name: "numreplicas", Type: "integer"}, {Name: "timeout", Type: "integer"}}}, Run: runWait},
	}
}

func runPing(c *Ctx, args [][]byte) {
	if c.W.Proto == 2 && c.Conn.Subscribed() && len(args) <= 2 {
		// In subscribed mode a RESP2 PING answers like a message.
		c.W.Array(2)
		c.W.BulkString("pong")
		if len(args) == 2 {
			c.W.Bulk(args[1])
		} else {
			c.W.BulkString("")
		}
		return
	}
	switch len(args) {
	case 1:
		c.W.Simple("PONG")
	case 2:
		c.W.Bulk(args[1])
	default:
		c.W.Error(errArity("ping"))
	}
}

func runEcho(c *Ctx, args [][]byte) { c.W.Bulk(args[1]) }

func runQuit(c *Ctx, _ [][]byte) {
	c.W.OK()
	c.Conn.Close = true
}

func runSelect(c *Ctx, args [][]byte) {
	n, ok := parseInt(args[1])
	switch {
	case !ok:
		c.W.Error(errNotInteger)
	case n != 0:
		c.W.Error(errDBIndex)
	default:
		c.W.OK()
	}
}

// authenticate checks a user and password against the default user.
func (c *Ctx) authenticate(user, pass []byte) bool {
	if user != nil && string(user) != "default" {
		// Still spend the comparison, so a wrong user name is not faster.
		secret.Equal(c.Env.Options.RequirePass, string(pass))
		return false
	}
	return secret.Equal(c.Env.Options.RequirePass, string(pass))
}

func runAuth(c *Ctx, args [][]byte) {
	if len(args) > 3 {
		c.W.Error(errSyntax)
		return
	}
	var user []byte
	pass := args[1]
	if len(args) == 3 {
		user, pass = args[1], args[2]
	}
	if c.Env.Options.RequirePass == "" && len(args) == 2 {
		c.W.Error(errNoPassword)
		return
	}
	if c.Env.Options.RequirePass == "" {
		// No password set: the default user accepts any password, as in Redis.
		if string(user) != "default" {
			c.W.Error(errWrongPass)
			return
		}
		c.Conn.Authenticated = true
		c.W.OK()
		return
	}
	if !c.authenticate(user, pass) {
		c.W.Error(errWrongPass)
		return
	}
	c.Conn.Authenticated = true
	c.W.OK()
}

// runHello is HELLO [protover [AUTH username password] [SETNAME clientname]].
func runHello(c *Ctx, args [][]byte) {
	proto := c.Conn.Proto
	if len(args) >= 2 {
		v, ok := parseInt(args[1])
		if !ok {
			c.W.Error("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			c.W.Error(errNoProto)
			return
		}
		proto = int(v)
	}
	var user, pass, name []byte
	hasAuth, hasName := false, false
	for i := 2; i < len(args); i++ {
		switch {
		case equalFold(args[i], "auth") && i+2 < len(args):
			user, pass, hasAuth = args[i+1], args[i+2], true
			i += 2
		case equalFold(args[i], "setname") && i+1 < len(args):
			// Redis checks the name while parsing, before authenticating.
			name, hasName = args[i+1], true
			if !validClientName(name) {
				c.W.Error(errClientName)
				return
			}
			i++
		default:
			c.W.Error("ERR Syntax error in HELLO option '" + clip(args[i], 128) + "'")
			return
		}
	}
	if hasAuth {
		if c.Env.Options.RequirePass != "" && !c.authenticate(user, pass) {
			c.W.Error(errWrongPass)
			return
		}
		if c.Env.Options.RequirePass == "" && string(user) != "default" {
			c.W.Error(errWrongPass)
			return
		}
		c.Conn.Authenticated = true
	}
	if !c.Conn.Authenticated {
		c.W.Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if hasName {
		c.Conn.setName(string(name))
	}
	c.Conn.setProto(proto)
	c.W.Proto = proto
	c.W.Map(7)
	c.W.BulkString("server")
	c.W.BulkString("redis")
	c.W.BulkString("version")
	c.W.BulkString(RedisVersion)
	c.W.BulkString("proto")
	c.W.Int(int64(proto))
	c.W.BulkString("id")
	c.W.Int(c.Conn.ID)
	c.W.BulkString("mode")
	c.W.BulkString(c.Env.mode())
	c.W.BulkString("role")
	if c.role() == "master" {
		c.W.BulkString("master")
	} else {
		c.W.BulkString("replica")
	}
	c.W.BulkString("modules")
	c.W.Array(0)
}

const errClientName = "ERR Client names cannot contain spaces, newlines or special characters."

// validClientName is Redis' rule: printable ASCII without spaces.
func validClientName(name []byte) bool {
	for _, b := range name {
		if b < '!' || b > '~' {
			return false
		}
	}
	return true
}

// mode is what HELLO and INFO report. sluice always answers the CLUSTER
// commands, so it says "cluster" as a cluster-enabled Redis does; clients
// in standalone mode ignore it.
func (e *Env) mode() string { return "cluster" }

// runReset is RESET: the connection's state back to a new connection's —
// RESP2, no name, no READONLY/NO-EVICT/NO-TOUCH, and not authenticated
// when a password is set. The library name and version stay, as in Redis.
func runReset(c *Ctx, _ [][]byte) {
	if c.Conn.Sub != nil {
		c.Env.PubSub.Drop(c.Conn.Sub)
	}
	c.Conn.setProto(2)
	c.W.Proto = 2
	c.Conn.setName("")
	c.Conn.setFlag(FlagReadOnly|FlagNoEvict|FlagNoTouch, false)
	c.Conn.Authenticated = c.Env.Options.RequirePass == ""
	c.Conn.tx.reset()
	c.W.Simple("RESET")
}

// runWait is WAIT numreplicas timeout: a single node has no replica to
// wait for, so it answers 0 at once (Redis would block until the timeout
// when asked for replicas it does not have).
func runWait(c *Ctx, args [][]byte) {
	if _, ok := parseInt(args[1]); !ok {
		c.W.Error(errNotInteger)
		return
	}
	timeout, ok := parseInt(args[2])
	if !ok {
		c.W.Error(errTimeout)
		return
	}
	if timeout < 0 {
		c.W.Error("ERR timeout is negative")
		return
	}
	c.W.Int(c.replicasHolding())
}

// replicasHolding is WAIT's answer: how many replicas hold this
// connection's writes. A single node has none. In a replicated cluster a
// write is acknowledged only once a majority holds it, so at least a
// majority less the leader do: that lower bound is the answer.
func (c *Ctx) replicasHolding() int64 {
	n := c.Env.Cluster
	if n == nil || !n.Serving() {
		return 0
	}
	members, err := n.Members()
	if err != nil {
		return 0
	}
	voters := 0
	for _, m := range members {
		if m.Voter {
			voters++
		}
	}
	return int64(voters / 2)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
