package commands

import (
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/cmdspec"
)

// ConnFlags are the per-connection modes a client switches on with
// READONLY, CLIENT NO-EVICT and CLIENT NO-TOUCH. sluice accepts them and
// reports them in CLIENT LIST; none changes what a command does.
type ConnFlags uint8

// The flags, with the letter CLIENT LIST shows for each.
const (
	FlagReadOnly ConnFlags = 1 << iota // r
	FlagNoEvict                        // e
	FlagNoTouch                        // T
)

// letters writes the flags as Redis' CLIENT LIST "flags=" field.
func (f ConnFlags) letters(closing bool) string {
	var b []byte
	if closing {
		b = append(b, 'c')
	}
	if f&FlagReadOnly != 0 {
		b = append(b, 'r')
	}
	if f&FlagNoEvict != 0 {
		b = append(b, 'e')
	}
	if f&FlagNoTouch != 0 {
		b = append(b, 'T')
	}
	if len(b) == 0 {
		return "N"
	}
	return string(b)
}

// ClientInfo is one connection as CLIENT LIST shows it.
type ClientInfo struct {
	ID        int64
	Addr      string
	LocalAddr string
	// FD is the socket's file descriptor, -1 when unknown.
	FD      int
	Name    string
	LibName string
	LibVer  string
	Proto   int
	Flags   ConnFlags
	// Age and Idle are in whole seconds.
	Age, Idle int64
	// LastCmd is the full name of the last command run ("client|list"),
	// "NULL" before the first.
	LastCmd string
	// OutputBytes is how much of the replies sent is not yet in the
	// socket (CLIENT LIST's omem).
	OutputBytes int64
}

// Clients is the server's registry of open connections.
type Clients interface {
	// List describes every open connection, in ID order.
	List() []ClientInfo
	// Kill closes every connection for which match returns true and
	// reports how many it closed. It is safe to call from any connection's
	// goroutine; the caller's own connection is never passed to match (a
	// client that kills itself is handled by the command, which closes it
	// after the reply).
	Kill(match func(*ClientInfo) bool) int
}

// Snapshot copies the fields other goroutines may read; call it from any
// goroutine. The server fills in FD, Age, Idle and LastCmd.
func (c *Conn) Snapshot() ClientInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ClientInfo{ID: c.ID, Addr: c.Addr, LocalAddr: c.LocalAddr, FD: -1, Name: c.Name,
		LibName: c.LibName, LibVer: c.LibVer, Proto: c.Proto, Flags: c.Flags, LastCmd: "NULL"}
}

// setName, setLib, setProto and setFlag change the fields Snapshot reads.
// Only the connection's goroutine calls them, so its own reads need no lock.
func (c *Conn) setName(name string) {
	c.mu.Lock()
	c.Name = name
	c.mu.Unlock()
}

func (c *Conn) setLib(name, ver *string) {
	c.mu.Lock()
	if name != nil {
		c.LibName = *name
	}
	if ver != nil {
		c.LibVer = *ver
	}
	c.mu.Unlock()
}

func (c *Conn) setProto(p int) {
	c.mu.Lock()
	c.Proto = p
	c.mu.Unlock()
}

func (c *Conn) setFlag(f ConnFlags, on bool) {
	c.mu.Lock()
	if on {
		c.Flags |= f
	} else {
		c.Flags &^= f
	}
	c.mu.Unlock()
}

// appendClientLine writes one CLIENT LIST line in Redis 7.2's field order.
// Of the per-client buffers Redis counts, sluice reports the unsent output
// (omem, also counted in tot-mem); the others are 0.
func appendClientLine(b []byte, ci *ClientInfo, closing bool) []byte {
	b = append(b, "id="...)
	b = strconv.AppendInt(b, ci.ID, 10)
	b = append(b, " addr="...)
	b = append(b, ci.Addr...)
	b = append(b, " laddr="...)
	b = append(b, ci.LocalAddr...)
	b = append(b, " fd="...)
	b = strconv.AppendInt(b, int64(ci.FD), 10)
	b = append(b, " name="...)
	b = append(b, ci.Name...)
	b = append(b, " age="...)
	b = strconv.AppendInt(b, ci.Age, 10)
	b = append(b, " idle="...)
	b = strconv.AppendInt(b, ci.Idle, 10)
	b = append(b, " flags="...)
	b = append(b, ci.Flags.letters(closing)...)
	b = append(b, " db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0"+
		" rbs=0 rbp=0 obl=0 oll=0 omem="...)
	b = strconv.AppendInt(b, ci.OutputBytes, 10)
	b = append(b, " tot-mem="...)
	b = strconv.AppendInt(b, ci.OutputBytes, 10)
	b = append(b, " events=r cmd="...)
	b = append(b, ci.LastCmd...)
	b = append(b, " user=default redir=-1 resp="...)
	b = strconv.AppendInt(b, int64(ci.Proto), 10)
	b = append(b, " lib-name="...)
	b = append(b, ci.LibName...)
	b = append(b, " lib-ver="...)
	b = append(b, ci.LibVer...)
	return append(b, '\n')
}

func clientCommands() []*Command {
	sub := func(name string, arity int, flags []string, summary string, run func(*Ctx, [][]byte), args ...Arg) *Command {
		return &Command{Spec: cmdspec.Spec{Name: name, Arity: arity, Flags: flags, Group: "connection", Since: "2.4.0",
			Summary: summary, Complexity: "O(1)", Args: args}, Run: run}
	}
	std := []string{"noscript", "loading", "stale"}
	admin := []string{"admin", "noscript", "loading", "stale"}
	onOff := Arg{Name: "enabled", Type: "oneof", Sub: []Arg{
		{Name: "on", Type: "pure-token", Token: "ON"}, {Name: "off", Type: "pure-token", Token: "OFF"}}}
	clientType := Arg{Name: "client-type", Type: "oneof", Token: "TYPE", Optional: true, Sub: []Arg{
		{Name: "normal", Type: "pure-token", Token: "NORMAL"}, {Name: "master", Type: "pure-token", Token: "MASTER"},
		{Name: "replica", Type: "pure-token", Token: "REPLICA"}, {Name: "pubsub", Type: "pure-token", Token: "PUBSUB"}}}
	return []*Command{{
		Spec: cmdspec.Spec{Name: "client", Arity: -2, Group: "connection", Since: "2.4.0",
			Summary: "A container for client connection commands.", Complexity: "Depends on subcommand."}, Subs: []*Command{
			sub("id", 2, std, "Returns the unique client ID of the connection.", runClientID),
			sub("setname", 3, std, "Sets the connection name.", runClientSetName,
				Arg{Name: "connection-name", Type: "string"}),
			sub("getname", 2, std, "Returns the name of the connection.", runClientGetName),
			sub("setinfo", 4, std, "Sets information specific to the client or connection.", runClientSetInfo,
				Arg{Name: "attr", Type: "oneof", Sub: []Arg{
					{Name: "libname", Type: "string", Token: "LIB-NAME"},
					{Name: "libver", Type: "string", Token: "LIB-VER"}}}),
			sub("info", 2, std, "Returns information about the connection.", runClientInfo),
			sub("list", -2, admin, "Lists open connections.", runClientList,
				clientType, Arg{Name: "client-id", Type: "integer", Token: "ID", Optional: true, Multiple: true}),
			sub("kill", -3, admin, "Terminates open connections.", runClientKill,
				Arg{Name: "filter", Type: "oneof", Sub: []Arg{
					{Name: "old-format", Type: "string", Display: "ip:port"},
					{Name: "new-format", Type: "oneof", Multiple: true, Sub: []Arg{
						{Name: "client-id", Type: "integer", Token: "ID", Optional: true},
						clientType,
						{Name: "username", Type: "string", Token: "USER", Optional: true},
						{Name: "addr", Type: "string", Token: "ADDR", Optional: true, Display: "ip:port"},
						{Name: "laddr", Type: "string", Token: "LADDR", Optional: true, Display: "ip:port"},
						{Name: "skipme", Type: "oneof", Token: "SKIPME", Optional: true, Sub: []Arg{
							{Name: "yes", Type: "pure-token", Token: "YES"}, {Name: "no", Type: "pure-token", Token: "NO"}}},
					}},
				}}),
			sub("no-evict", 3, admin, "Sets the client eviction mode of the connection (accepted; sluice never evicts clients).",
				func(c *Ctx, args [][]byte) { c.clientFlag(args, FlagNoEvict) }, onOff),
			sub("no-touch", 3, std, "Controls whether commands sent by the client affect the LRU/LFU of accessed keys (accepted).",
				func(c *Ctx, args [][]byte) { c.clientFlag(args, FlagNoTouch) }, onOff),
			sub("getredir", 2, std, "Returns the client ID to which the connection's tracking notifications are redirected (always -1).",
				func(c *Ctx, _ [][]byte) { c.W.Int(-1) }),
			sub("unblock", -3, admin, "Unblocks a client blocked by a blocking command (sluice never blocks: always 0).",
				runClientUnblock, Arg{Name: "client-id", Type: "integer"},
				Arg{Name: "unblock-type", Type: "oneof", Optional: true, Sub: []Arg{
					{Name: "timeout", Type: "pure-token", Token: "TIMEOUT"}, {Name: "error", Type: "pure-token", Token: "ERROR"}}}),
			sub("help", 2, []string{"loading", "stale"}, "Returns helpful text about the different subcommands.", runClientHelp),
		},
	}}
}

func runClientID(c *Ctx, _ [][]byte) { c.W.Int(c.Conn.ID) }

func runClientSetName(c *Ctx, args [][]byte) {
	if !validClientName(args[2]) {
		c.W.Error(errClientName)
		return
	}
	c.Conn.setName(string(args[2]))
	c.W.OK()
}

func runClientGetName(c *Ctx, _ [][]byte) {
	if c.Conn.Name == "" {
		c.W.Null()
		return
	}
	c.W.BulkString(c.Conn.Name)
}

// runClientSetInfo is CLIENT SETINFO LIB-NAME|LIB-VER <value>, which
// go-redis, redis-py, Jedis and Lettuce send on every new connection.
func runClientSetInfo(c *Ctx, args [][]byte) {
	attr := lower(args[2])
	if attr != "lib-name" && attr != "lib-ver" {
		c.W.Error("ERR Unrecognized option '" + clip(args[2], 128) + "'")
		return
	}
	if !validClientName(args[3]) {
		c.W.Error("ERR " + clip(args[2], 128) + " cannot contain spaces, newlines or special characters.")
		return
	}
	v := string(args[3])
	if attr == "lib-name" {
		c.Conn.setLib(&v, nil)
	} else {
		c.Conn.setLib(nil, &v)
	}
	c.W.OK()
}

// clientType checks a CLIENT LIST/KILL TYPE name; every sluice connection
// is a normal client.
func clientType(c *Ctx, name []byte) (normal, ok bool) {
	switch lower(name) {
	case "normal":
		return true, true
	case "master", "slave", "replica", "pubsub":
		return false, true
	}
	c.W.Error("ERR Unknown client type '" + clip(name, 128) + "'")
	return false, false
}

// clients lists every connection with the caller's own entry showing the
// command running now, as Redis does.
func (c *Ctx) clients() []ClientInfo {
	var list []ClientInfo
	if c.Env.Clients != nil {
		list = c.Env.Clients.List()
	}
	self := -1
	for i := range list {
		if list[i].ID == c.Conn.ID {
			self = i
		}
	}
	if self < 0 {
		list = append(list, c.Conn.Snapshot())
		self = len(list) - 1
	}
	list[self].Idle = 0
	if c.cmd != nil {
		list[self].LastCmd = c.cmd.FullName()
	}
	return list
}

func runClientInfo(c *Ctx, _ [][]byte) {
	for _, ci := range c.clients() {
		if ci.ID == c.Conn.ID {
			c.W.Verbatim(string(appendClientLine(nil, &ci, c.Conn.Close)))
			return
		}
	}
}

// runClientList is CLIENT LIST [TYPE type] [ID id [id …]].
func runClientList(c *Ctx, args [][]byte) {
	var ids map[int64]bool
	all := true
	switch {
	case len(args) == 2:
	case len(args) == 4 && equalFold(args[2], "type"):
		normal, ok := clientType(c, args[3])
		if !ok {
			return
		}
		all = normal
	case len(args) > 3 && equalFold(args[2], "id"):
		ids = map[int64]bool{}
		for _, a := range args[3:] {
			id, ok := parseInt(a)
			if !ok || id < 1 {
				c.W.Error("ERR Invalid client ID")
				return
			}
			ids[id] = true
		}
	default:
		c.W.Error(errSyntax)
		return
	}
	var b []byte
	if all {
		for _, ci := range c.clients() {
			if ids == nil || ids[ci.ID] {
				b = appendClientLine(b, &ci, ci.ID == c.Conn.ID && c.Conn.Close)
			}
		}
	}
	c.W.Verbatim(string(b))
}

// clientFilter is CLIENT KILL's filter.
type clientFilter struct {
	id          int64
	addr, laddr string
	skipMe      bool
	none        bool // TYPE or USER that no sluice connection has
}

func (f *clientFilter) match(ci *ClientInfo) bool {
	return !f.none && (f.id == 0 || ci.ID == f.id) && (f.addr == "" || ci.Addr == f.addr) &&
		(f.laddr == "" || ci.LocalAddr == f.laddr)
}

// runClientKill is CLIENT KILL ip:port (the old form: replies OK or an
// error) or CLIENT KILL <filter> <value> … (replies the count killed).
func runClientKill(c *Ctx, args [][]byte) {
	f := clientFilter{skipMe: true}
	old := len(args) == 3
	switch {
	case old:
		f.addr, f.skipMe = string(args[2]), false
	case len(args)%2 == 0:
		for i := 2; i < len(args); i += 2 {
			v := args[i+1]
			switch lower(args[i]) {
			case "id":
				id, ok := parseInt(v)
				if !ok || id < 1 {
					c.W.Error("ERR client-id should be greater than 0")
					return
				}
				f.id = id
			case "type":
				normal, ok := clientType(c, v)
				if !ok {
					return
				}
				f.none = f.none || !normal
			case "user":
				if string(v) != "default" {
					c.W.Error("ERR No such user '" + clip(v, 128) + "'")
					return
				}
			case "addr":
				f.addr = string(v)
			case "laddr":
				f.laddr = string(v)
			case "skipme":
				switch {
				case equalFold(v, "yes"):
					f.skipMe = true
				case equalFold(v, "no"):
					f.skipMe = false
				default:
					c.W.Error(errSyntax)
					return
				}
			default:
				c.W.Error(errSyntax)
				return
			}
		}
	default:
		c.W.Error(errSyntax)
		return
	}
	killed := 0
	if c.Env.Clients != nil {
		killed = c.Env.Clients.Kill(func(ci *ClientInfo) bool { return ci.ID != c.Conn.ID && f.match(ci) })
	}
	if !f.skipMe {
		self := c.Conn.Snapshot()
		if f.match(&self) {
			// Redis closes the caller after this reply.
			c.Conn.Close = true
			killed++
		}
	}
	switch {
	case !old:
		c.W.Int(int64(killed))
	case killed == 0:
		c.W.Error("ERR No such client")
	default:
		c.W.OK()
	}
}

// clientFlag is CLIENT NO-EVICT|NO-TOUCH ON|OFF.
func (c *Ctx) clientFlag(args [][]byte, f ConnFlags) {
	switch {
	case equalFold(args[2], "on"):
		c.Conn.setFlag(f, true)
	case equalFold(args[2], "off"):
		c.Conn.setFlag(f, false)
	default:
		c.W.Error(errSyntax)
		return
	}
	c.W.OK()
}

// runClientUnblock answers 0: no sluice command ever blocks.
func runClientUnblock(c *Ctx, args [][]byte) {
	if _, ok := parseInt(args[2]); !ok {
		c.W.Error(errNotInteger)
		return
	}
	if len(args) > 4 || (len(args) == 4 && !equalFold(args[3], "timeout") && !equalFold(args[3], "error")) {
		c.W.Error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
		return
	}
	c.W.Int(0)
}

func runClientHelp(c *Ctx, _ [][]byte) {
	c.W.BulkStrings(strings.Split(`CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:
GETNAME
    Return the name of the current connection.
GETREDIR
    Return the client ID tracking notifications are redirected to (always -1).
ID
    Return the ID of the current connection.
INFO
    Return information about the current client connection.
KILL <ip:port>
    Kill connection made from <ip:port>.
KILL <option> <value> [<option> <value> [...]]
    Kill connections. Options are: ID <client-id>, TYPE normal|master|replica|pubsub,
    USER <username>, ADDR <ip:port>, LADDR <ip:port>, SKIPME yes|no.
LIST [TYPE normal|master|replica|pubsub] [ID <client-id> [...]]
    Return information about client connections.
NO-EVICT (ON|OFF)
    Accepted for compatibility: sluice never evicts clients.
NO-TOUCH (ON|OFF)
    Accepted for compatibility.
SETINFO <LIB-NAME|LIB-VER> <value>
    Set client library name or version.
SETNAME <name>
    Assign the name <name> to the current connection.
UNBLOCK <clientid> [TIMEOUT|ERROR]
    Always 0: no sluice command blocks.
HELP
    Print this help.`, "\n"))
}
