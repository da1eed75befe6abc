package commands

import "strings"

func commandCommand() *Command {
	sub := func(name string, arity int, summary string, run func(*Ctx, [][]byte)) *Command {
		return &Command{Name: name, Arity: arity, Flags: []string{"loading", "stale"}, Group: "server",
			Since: "2.8.13", Summary: summary, Complexity: "O(N)", Run: run}
	}
	return &Command{
		Name: "command", Arity: -1, Flags: []string{"loading", "stale"}, Group: "server", Since: "2.8.13",
		Summary: "Returns detailed information about all commands.", Complexity: "O(N)",
		Run: func(c *Ctx, _ [][]byte) { c.commandInfos(c.Env.Table.Commands()) },
		Subs: []*Command{
			sub("count", 2, "Returns a count of commands.", func(c *Ctx, _ [][]byte) {
				c.W.Int(int64(len(c.Env.Table.Commands())))
			}),
			sub("list", -2, "Returns a list of command names.", func(c *Ctx, _ [][]byte) {
				cmds := c.Env.Table.Commands()
				c.W.Array(len(cmds))
				for _, cmd := range cmds {
					c.W.BulkString(cmd.Name)
				}
			}),
			sub("info", -2, "Returns information about one, multiple or all commands.", func(c *Ctx, args [][]byte) {
				if len(args) == 2 {
					c.commandInfos(c.Env.Table.Commands())
					return
				}
				cmds := make([]*Command, len(args)-2)
				for i, name := range args[2:] {
					cmds[i] = c.Env.Table.lookupFull(name)
				}
				c.commandInfos(cmds)
			}),
			sub("docs", -2, "Returns documentary information about one, multiple or all commands.", func(c *Ctx, args [][]byte) {
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
			}),
			sub("getkeys", -3, "Extracts the key names from an arbitrary command.", runCommandGetKeys),
			sub("help", 2, "Returns helpful text about the different subcommands.", func(c *Ctx, _ [][]byte) {
				c.W.BulkStrings([]string{"COMMAND [<subcommand> [<arg> ...]]. Subcommands are:",
					"(no subcommand)", "    Return details about all commands.",
					"COUNT", "    Return the total number of commands.",
					"LIST", "    Return a list of all commands.",
					"INFO [<command-name> ...]", "    Return details about commands.",
					"DOCS [<command-name> ...]", "    Return documentation details about commands.",
					"GETKEYS <full-command>", "    Return the keys from a full command."})
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

// commandInfos writes COMMAND INFO entries; a nil command is a null.
func (c *Ctx) commandInfos(cmds []*Command) {
	c.W.Array(len(cmds))
	for _, cmd := range cmds {
		if cmd == nil {
			c.W.NullArray()
			continue
		}
		c.commandInfo(cmd)
	}
}

// commandInfo writes Redis 7's ten-field command description.
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
	w.Set(0) // ACL categories
	w.Set(0) // tips
	c.keySpecs(cmd)
	w.Array(len(cmd.Subs))
	for _, s := range cmd.Subs {
		c.commandInfo(s)
	}
}

// keySpecs describes key positions the Redis 7 way, for clients that read
// key specs rather than first/last/step.
func (c *Ctx) keySpecs(cmd *Command) {
	w := c.W
	if cmd.FirstKey == 0 {
		w.Array(0)
		return
	}
	flags := "RW"
	for _, f := range cmd.Flags {
		if f == "readonly" {
			flags = "RO"
		}
	}
	w.Array(1)
	w.Map(3)
	w.BulkString("flags")
	w.Set(1)
	w.Simple(flags)
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
	last := int64(0)
	if cmd.LastKey < 0 {
		last = int64(cmd.LastKey)
	} else {
		last = int64(cmd.LastKey - cmd.FirstKey)
	}
	w.Int(last)
	w.BulkString("keystep")
	w.Int(int64(cmd.Step))
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

// runCommandGetKeys is COMMAND GETKEYS <command> <args…>.
func runCommandGetKeys(c *Ctx, args [][]byte) {
	full := args[2:]
	cmd := c.Env.Table.Lookup(full[0])
	if cmd == nil {
		c.W.Error("ERR Invalid command specified")
		return
	}
	if !cmd.arityOK(len(full)) {
		c.W.Error("ERR Invalid number of arguments specified for command")
		return
	}
	if cmd.FirstKey == 0 {
		c.W.Error("ERR The command has no key arguments")
		return
	}
	last := cmd.LastKey
	if last < 0 {
		last = len(full) + last
	}
	var keys [][]byte
	for i := cmd.FirstKey; i <= last && i < len(full); i += cmd.Step {
		keys = append(keys, full[i])
	}
	c.W.Array(len(keys))
	for _, k := range keys {
		c.W.Bulk(k)
	}
}

// argDocs writes argument descriptions as Redis 7 does; redis-cli builds its
// help and hints from them.
func (c *Ctx) argDocs(args []Arg) {
	w := c.W
	w.Array(len(args))
	for _, a := range args {
		fields := 3
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
		w.BulkString("display_text")
		w.BulkString(a.Name)
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
