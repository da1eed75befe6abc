package commands

import (
	"slices"
	"strings"

	"github.com/sluice-rl/sluice/cmdspec"
)

func commandCommand() *Command {
	sub := func(name string, arity int, summary string, run func(*Ctx, [][]byte), args ...Arg) *Command {
		return &Command{Spec: cmdspec.Spec{Name: name, Arity: arity, Flags: []string{"loading", "stale"}, Group: "server",
			Since: "7.0.0", Summary: summary, Complexity: "O(N) where N is the number of commands", Args: args}, Run: run}
	}
	names := Arg{Name: "command-name", Type: "string", Optional: true, Multiple: true}
	full := []Arg{{Name: "command", Type: "string"}, {Name: "arg", Type: "string", Optional: true, Multiple: true}}
	count := sub("count", 2, "Returns a count of commands.", func(c *Ctx, _ [][]byte) {
		c.W.Int(int64(len(c.Env.Table.Commands())))
	})
	count.Since = "2.8.13"
	info := sub("info", -2, "Returns information about one, multiple or all commands.", runCommandInfo, names)
	info.Since = "2.8.13"
	getkeys := sub("getkeys", -3, "Extracts the key names from an arbitrary command.",
		func(c *Ctx, args [][]byte) { c.commandGetKeys(args, false) }, full...)
	getkeys.Since = "2.8.13"
	return &Command{
		Spec: cmdspec.Spec{Name: "command", Arity: -1, Flags: []string{"loading", "stale"}, Group: "server", Since: "2.8.13",
			Summary: "Returns detailed information about all commands.", Complexity: "O(N) where N is the total number of commands",
			Tips: []string{"nondeterministic_output_order"}}, Run: func(c *Ctx, _ [][]byte) { c.commandInfos(c.Env.Table.Commands()) },
		Subs: []*Command{
			count,
			sub("list", -2, "Returns a list of command names.", runCommandList,
				Arg{Name: "filterby", Type: "oneof", Token: "FILTERBY", Optional: true, Sub: []Arg{
					{Name: "module-name", Type: "string", Token: "MODULE"},
					{Name: "category", Type: "string", Token: "ACLCAT"},
					{Name: "pattern", Type: "pattern", Token: "PATTERN"}}}),
			info,
			sub("docs", -2, "Returns documentary information about one, multiple or all commands.", runCommandDocs, names),
			getkeys,
			sub("getkeysandflags", -3, "Extracts the key names and access flags for an arbitrary command.",
				func(c *Ctx, args [][]byte) { c.commandGetKeys(args, true) }, full...),
			sub("help", 2, "Returns helpful text about the different subcommands.", func(c *Ctx, _ [][]byte) {
				c.W.BulkStrings([]string{"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
					"(no subcommand)", "    Return details about all commands.",
					"COUNT", "    Return the total number of commands.",
					"LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
					"    Return a list of all commands, optionally filtered.",
					"INFO [<command-name> ...]", "    Return details about commands.",
					"DOCS [<command-name> ...]", "    Return documentation details about commands.",
					"GETKEYS <full-command>", "    Return the keys from a full command.",
					"GETKEYSANDFLAGS <full-command>", "    Return the keys and the access flags from a full command.",
					"HELP", "    Print this help."})
			}),
		},
	}
}

// lookupFull finds "name" or "container|sub".
func (t *Table) lookupFull(name []byte) *Command {
	s := strings.ToLower(string(name))
	if i := strings.IndexByte(s, '|'); i >= 0 {
		if parent := t.byName[s[:i]]; parent != nil && parent.subs != nil {
			return parent.subs[s[i+1:]]
		}
		return nil
	}
	return t.byName[s]
}

func runCommandInfo(c *Ctx, args [][]byte) {
	if len(args) == 2 {
		c.commandInfos(c.Env.Table.Commands())
		return
	}
	cmds := make([]*Command, len(args)-2)
	for i, name := range args[2:] {
		cmds[i] = c.Env.Table.lookupFull(name)
	}
	c.commandInfos(cmds)
}

func runCommandDocs(c *Ctx, args [][]byte) {
	var cmds []*Command
	if len(args) == 2 {
		cmds = c.Env.Table.Commands()
	} else {
		for _, name := range args[2:] {
			if cmd := c.Env.Table.lookupFull(name); cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
	}
	c.W.Map(len(cmds))
	for _, cmd := range cmds {
		c.W.BulkString(cmd.FullName())
		c.commandDoc(cmd)
	}
}

// runCommandList is COMMAND LIST [FILTERBY MODULE m | ACLCAT cat | PATTERN p]:
// every command and subcommand name, as Redis lists them.
func runCommandList(c *Ctx, args [][]byte) {
	keep := func(*Command) bool { return true }
	switch {
	case len(args) == 2:
	case len(args) == 5 && equalFold(args[2], "filterby"):
		v := args[4]
		switch {
		case equalFold(args[3], "module"):
			keep = func(*Command) bool { return false }
		case equalFold(args[3], "aclcat"):
			cat := "@" + lower(v)
			keep = func(cmd *Command) bool { return slices.Contains(cmd.aclCategories(), cat) }
		case equalFold(args[3], "pattern"):
			m, bad := compileGlob(v)
			if bad != "" {
				c.W.Error(bad)
				return
			}
			keep = func(cmd *Command) bool { return m.match([]byte(cmd.FullName())) }
		default:
			c.W.Error(errSyntax)
			return
		}
	default:
		c.W.Error(errSyntax)
		return
	}
	var names []string
	for _, cmd := range c.Env.Table.Commands() {
		if keep(cmd) {
			names = append(names, cmd.FullName())
		}
		for _, s := range cmd.Subs {
			if keep(s) {
				names = append(names, s.FullName())
			}
		}
	}
	c.W.BulkStrings(names)
}

// commandInfos writes COMMAND INFO entries; a nil command is a null.
func (c *Ctx) commandInfos(cmds []*Command) {
	c.W.Array(len(cmds))
	for _, cmd := range cmds {
		if cmd == nil {
			c.W.Null()
			continue
		}
		c.commandInfo(cmd)
	}
}

// commandInfo writes Redis 7's ten-field command description: name, arity,
// flags, first key, last key, step, ACL categories, tips, key specs,
// subcommands.
func (c *Ctx) commandInfo(cmd *Command) {
	w := c.W
	w.Array(10)
	w.BulkString(cmd.FullName())
	w.Int(int64(cmd.Arity))
	w.Set(len(cmd.Flags))
	for _, f := range cmd.Flags {
		w.Simple(f)
	}
	w.Int(int64(cmd.FirstKey))
	w.Int(int64(cmd.LastKey))
	w.Int(int64(cmd.Step))
	cats := cmd.aclCategories()
	w.Set(len(cats))
	for _, cat := range cats {
		w.Simple(cat)
	}
	w.Set(len(cmd.Tips))
	for _, tip := range cmd.Tips {
		w.Simple(tip)
	}
	c.keySpecs(cmd)
	w.Array(len(cmd.Subs))
	for _, s := range cmd.Subs {
		c.commandInfo(s)
	}
}

// aclOrder is the order Redis lists ACL categories in.
var aclOrder = []string{"@keyspace", "@read", "@write", "@set", "@sortedset", "@list", "@hash", "@string",
	"@bitmap", "@hyperloglog", "@geo", "@stream", "@pubsub", "@admin", "@fast", "@slow", "@blocking",
	"@dangerous", "@connection", "@transaction", "@scripting"}

// aclCategories are the command's ACL categories: those its flags imply
// (as Redis derives them), its group's, and any listed explicitly.
func (cmd *Command) aclCategories() []string {
	has := map[string]bool{}
	for _, f := range cmd.Flags {
		switch f {
		case "write":
			has["@write"] = true
		case "readonly":
			has["@read"] = true
		case "admin":
			has["@admin"], has["@dangerous"] = true, true
		case "fast":
			has["@fast"] = true
		}
	}
	if !has["@fast"] {
		has["@slow"] = true
	}
	switch cmd.Group {
	case "generic":
		has["@keyspace"] = true
	case "string":
		has["@string"] = true
	case "connection":
		has["@connection"] = true
	}
	if cmd.parent != nil && cmd.parent.Group == "connection" {
		has["@connection"] = true
	}
	for _, cat := range cmd.ACLCategories {
		has[cat] = true
	}
	var out []string
	for _, cat := range aclOrder {
		if has[cat] {
			out = append(out, cat)
		}
	}
	return out
}

// keyFlags are the key-spec flags of the command's keys.
func (cmd *Command) keyFlags() []string {
	if len(cmd.KeyFlags) > 0 {
		return cmd.KeyFlags
	}
	if cmd.HasFlag("readonly") {
		return []string{"RO", "ACCESS"}
	}
	return []string{"RW", "ACCESS", "UPDATE"}
}

// keySpecs describes key positions the Redis 7 way, for clients that read
// key specs rather than first/last/step.
func (c *Ctx) keySpecs(cmd *Command) {
	w := c.W
	if cmd.KeysOf != nil {
		c.movableKeySpec(cmd)
		return
	}
	if cmd.FirstKey == 0 {
		w.Array(0)
		return
	}
	flags := cmd.keyFlags()
	w.Array(1)
	w.Map(3)
	w.BulkString("flags")
	w.Set(len(flags))
	for _, f := range flags {
		w.Simple(f)
	}
	w.BulkString("begin_search")
	w.Map(2)
	w.BulkString("type")
	w.BulkString("index")
	w.BulkString("spec")
	w.Map(1)
	w.BulkString("index")
	w.Int(int64(cmd.FirstKey))
	w.BulkString("find_keys")
	w.Map(2)
	w.BulkString("type")
	w.BulkString("range")
	w.BulkString("spec")
	w.Map(3)
	w.BulkString("lastkey")
	// lastkey is relative to the first key; negative counts from the end.
	last := int64(cmd.LastKey)
	if cmd.LastKey >= 0 {
		last = int64(cmd.LastKey - cmd.FirstKey)
	}
	w.Int(last)
	w.BulkString("keystep")
	w.Int(int64(cmd.Step))
	w.BulkString("limit")
	w.Int(0)
}

// movableKeySpec describes the keys of a movablekeys command as Redis
// does where a key spec cannot list them all: the first, found after the
// keyword LIMIT, marked INCOMPLETE, so clients ask COMMAND GETKEYS.
func (c *Ctx) movableKeySpec(cmd *Command) {
	w := c.W
	flags := slices.Concat(cmd.keyFlags(), []string{"INCOMPLETE"})
	w.Array(1)
	w.Map(3)
	w.BulkString("flags")
	w.Set(len(flags))
	for _, f := range flags {
		w.Simple(f)
	}
	w.BulkString("begin_search")
	w.Map(2)
	w.BulkString("type")
	w.BulkString("keyword")
	w.BulkString("spec")
	w.Map(2)
	w.BulkString("keyword")
	w.BulkString("LIMIT")
	w.BulkString("startfrom")
	w.Int(1)
	w.BulkString("find_keys")
	w.Map(2)
	w.BulkString("type")
	w.BulkString("range")
	w.BulkString("spec")
	w.Map(3)
	w.BulkString("lastkey")
	w.Int(0)
	w.BulkString("keystep")
	w.Int(1)
	w.BulkString("limit")
	w.Int(0)
}

// commandDoc writes one COMMAND DOCS entry.
func (c *Ctx) commandDoc(cmd *Command) {
	w := c.W
	n := 4
	if len(cmd.Args) > 0 {
		n++
	}
	if len(cmd.Subs) > 0 {
		n++
	}
	w.Map(n)
	w.BulkString("summary")
	w.BulkString(cmd.Summary)
	w.BulkString("since")
	w.BulkString(cmd.Since)
	w.BulkString("group")
	w.BulkString(cmd.Group)
	w.BulkString("complexity")
	w.BulkString(cmd.Complexity)
	if len(cmd.Args) > 0 {
		w.BulkString("arguments")
		c.argDocs(cmd.Args)
	}
	if len(cmd.Subs) > 0 {
		w.BulkString("subcommands")
		w.Map(len(cmd.Subs))
		for _, s := range cmd.Subs {
			w.BulkString(s.FullName())
			c.commandDoc(s)
		}
	}
}

// commandGetKeys is COMMAND GETKEYS and GETKEYSANDFLAGS <command> <args…>,
// with Redis' checks in Redis' order.
func (c *Ctx) commandGetKeys(args [][]byte, withFlags bool) {
	full := args[2:]
	cmd := c.Env.Table.Lookup(full[0])
	if cmd != nil && cmd.subs != nil && len(full) >= 2 {
		cmd = cmd.subs[lower(full[1])]
	}
	switch {
	case cmd == nil:
		c.W.Error("ERR Invalid command specified")
		return
	case cmd.FirstKey == 0 && cmd.KeysOf == nil:
		c.W.Error("ERR The command has no key arguments")
		return
	case !cmd.arityOK(len(full)):
		c.W.Error("ERR Invalid number of arguments specified for command")
		return
	}
	var keys []int
	switch {
	case cmd.Machine != nil:
		keys = cmd.Machine.Keys(full) // the declaration locking and routing read
	case cmd.KeysOf != nil:
		keys = cmd.KeysOf(full)
	default:
		keys = cmd.keyPositions(len(full))
	}
	if cmd.KeysOf != nil && len(keys) == 0 {
		c.W.Error("ERR Invalid arguments specified for command")
		return
	}
	flags := cmd.keyFlags()
	c.W.Array(len(keys))
	for _, i := range keys {
		if !withFlags {
			c.W.Bulk(full[i])
			continue
		}
		c.W.Array(2)
		c.W.Bulk(full[i])
		c.W.Set(len(flags))
		for _, f := range flags {
			c.W.Simple(f)
		}
	}
}

// keyPositions lists the indexes of the keys in a call of n words.
func (cmd *Command) keyPositions(n int) []int {
	if cmd.FirstKey <= 0 || cmd.Step <= 0 {
		return nil
	}
	last := cmd.LastKey
	if last < 0 {
		last = n + last
	}
	var keys []int
	for i := cmd.FirstKey; i <= last && i < n; i += cmd.Step {
		keys = append(keys, i)
	}
	return keys
}

// valueTypes are the argument types that take a value, which Redis
// describes with a display_text (tokens and containers have none).
var valueTypes = map[string]bool{"key": true, "string": true, "integer": true, "double": true,
	"pattern": true, "unix-time": true}

// argDocs writes argument descriptions as Redis 7 does; redis-cli builds its
// help and hints from them.
func (c *Ctx) argDocs(args []Arg) {
	w := c.W
	w.Array(len(args))
	for _, a := range args {
		fields := 2
		if valueTypes[a.Type] {
			fields++
		}
		if a.Type == "key" {
			fields++
		}
		if a.Token != "" {
			fields++
		}
		if a.Optional || a.Multiple {
			fields++
		}
		if len(a.Sub) > 0 {
			fields++
		}
		w.Map(fields)
		w.BulkString("name")
		w.BulkString(a.Name)
		w.BulkString("type")
		w.BulkString(a.Type)
		if valueTypes[a.Type] {
			w.BulkString("display_text")
			if a.Display != "" {
				w.BulkString(a.Display)
			} else {
				w.BulkString(a.Name)
			}
		}
		if a.Type == "key" {
			// Every sluice command has one key spec.
			w.BulkString("key_spec_index")
			w.Int(0)
		}
		if a.Token != "" {
			w.BulkString("token")
			w.BulkString(a.Token)
		}
		if a.Optional || a.Multiple {
			var flags []string
			if a.Optional {
				flags = append(flags, "optional")
			}
			if a.Multiple {
				flags = append(flags, "multiple")
			}
			w.BulkString("flags")
			w.Set(len(flags))
			for _, f := range flags {
				w.Simple(f)
			}
		}
		if len(a.Sub) > 0 {
			w.BulkString("arguments")
			c.argDocs(a.Sub)
		}
	}
}
