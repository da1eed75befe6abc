package commands

import (
	"sort"
	"strings"
	"sync/atomic"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/machine"
)

// Command describes one command: what COMMAND reports about it and the
// function that runs it.
type Command struct {
	// Spec is what COMMAND says of it (a machine command's is the
	// machine's: one description for both tables).
	cmdspec.Spec
	// NoAuth lets an unauthenticated connection run the command.
	NoAuth bool
	// Waits says the command may block its caller on a disk write or a
	// Raft round trip (SAVE, RAFT …): an event loop runs it off the loop
	// (see Ctx.WouldWait).
	Waits bool
	// Run runs the command; args[0] is the name as the client sent it.
	Run func(c *Ctx, args [][]byte)
	// Subs are the subcommands of a container command (CLIENT, CLUSTER).
	Subs []*Command
	// Machine is set on the state machine's commands: Run is unused, and
	// Dispatch hands them to the Env's Applier.
	Machine *machine.Command
	// denyOOM: a machine command flagged denyoom, which over maxmemory is
	// refused when it would store more (see Ctx.refusedOOM).
	denyOOM bool
	// KeysOf finds the keys of a command whose keys move (movablekeys):
	// their indexes in args.
	KeysOf func(args [][]byte) []int

	parent  *Command
	subs    map[string]*Command
	calls   atomic.Int64
	limits  atomic.Int64
	allowed atomic.Int64
	lat     latency
}

// Arg documents one argument for COMMAND DOCS; it is the machine's type,
// so both tables document arguments alike.
type Arg = cmdspec.Arg

// FullName is the name Redis uses in errors and COMMAND: "client|setname".
func (c *Command) FullName() string {
	if c.parent != nil {
		return c.parent.Name + "|" + c.Name
	}
	return c.Name
}

// Calls counts how often the command ran.
func (c *Command) Calls() int64 { return c.calls.Load() }

// Calls counts the commands run, subcommands included: INFO's
// total_commands_processed, derived rather than kept twice.
func (t *Table) Calls() int64 {
	var n int64
	for _, c := range t.sorted {
		n += c.Calls()
		for _, s := range c.Subs {
			n += s.Calls()
		}
	}
	return n
}

// Allowed counts the requests a limiter command admitted.
func (c *Command) Allowed() int64 { return c.allowed.Load() }

// decided counts a limiter command's decision: refused, or admitted when
// the reply was a decision (not an error).
func (c *Command) decided(out machine.Outcome, answered bool) {
	switch {
	case out.Limited:
		c.limits.Add(1)
	case answered && c.Machine != nil && c.Machine.Decides:
		c.allowed.Add(1)
	}
}

// Limited counts the requests a limiter command refused.
func (c *Command) Limited() int64 { return c.limits.Load() }

func (c *Command) arityOK(n int) bool {
	if c.Arity >= 0 {
		return n == c.Arity
	}
	return n >= -c.Arity
}

// Table is the set of commands a server answers.
type Table struct {
	byName map[string]*Command
	sorted []*Command
	// applyPanic is the machine's internal DEBUG APPLY-PANIC, which the
	// surface's DEBUG hands to the Applier; txExec its transaction, which
	// EXEC hands it.
	applyPanic, txExec *Command
}

// NewTable builds the table of every command sluice knows: the server
// surface's own and m's.
func NewTable(m *machine.Machine) *Table {
	t := &Table{byName: map[string]*Command{}}
	for _, group := range [][]*Command{
		connectionCommands(),
		serverCommands(),
		{latencyCommand()},
		pubsubCommands(),
		hotCommands(),
		clientCommands(),
		clusterCommands(),
		scanCommands(),
		persistCommands(),
		replicationCommands(),
		txCommands(),
		machineCommands(m),
	} {
		for _, c := range group {
			t.add(c)
		}
	}
	sort.Slice(t.sorted, func(i, j int) bool { return t.sorted[i].Name < t.sorted[j].Name })
	if mc := m.Lookup([]byte("debug")); mc != nil && mc.Internal() {
		t.applyPanic = &Command{Spec: cmdspec.Spec{Name: "apply-panic", Arity: mc.Arity, Flags: mc.Flags}, Machine: mc}
	}
	if mc := m.Lookup([]byte("exec")); mc != nil && mc.Internal() {
		t.txExec = &Command{Spec: cmdspec.Spec{Name: "exec", Arity: mc.Arity, Flags: mc.Flags}, Machine: mc}
	}
	return t
}

func (t *Table) add(c *Command) {
	if _, dup := t.byName[c.Name]; dup {
		panic("commands: duplicate command " + c.Name)
	}
	t.byName[c.Name] = c
	t.sorted = append(t.sorted, c)
	if len(c.Subs) > 0 {
		c.subs = map[string]*Command{}
		for _, s := range c.Subs {
			s.parent = c
			c.subs[s.Name] = s
		}
	}
}

// Commands lists the commands in name order.
func (t *Table) Commands() []*Command { return t.sorted }

// Lookup finds a command by name in any case.
func (t *Table) Lookup(name []byte) *Command {
	var buf [32]byte
	if len(name) > len(buf) {
		return t.byName[strings.ToLower(string(name))]
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return t.byName[string(buf[:len(name)])]
}

// Dispatch runs one command and writes its one reply, checking what Redis
// checks first: the command exists, its arity, then authentication.
func (t *Table) Dispatch(c *Ctx, args [][]byte) {
	t.DispatchCommand(c, t.Lookup(args[0]), args)
}

// DispatchCommand is Dispatch for a caller that has looked the command up
// already (Lookup(args[0]), nil when unknown).
func (t *Table) DispatchCommand(c *Ctx, cmd *Command, args [][]byte) {
	if cmd == nil {
		c.txRefused()
		c.W.Error(errUnknownCommand(args))
		return
	}
	if !cmd.arityOK(len(args)) {
		c.txRefused()
		c.W.Error(errArity(cmd.Name))
		return
	}
	if cmd.subs != nil && len(args) >= 2 {
		sub := cmd.subs[lower(args[1])]
		if sub == nil {
			c.txRefused()
			c.W.Error(errUnknownSubcommand(cmd.Name, args[1]))
			return
		}
		if !sub.arityOK(len(args)) {
			c.txRefused()
			c.W.Error(errArity(sub.FullName()))
			return
		}
		cmd = sub
	}
	if !c.Conn.Authenticated && !cmd.NoAuth && (cmd.parent == nil || !cmd.parent.NoAuth) {
		c.txRefused()
		c.W.Error(errNoAuth)
		return
	}
	if c.Conn.tx.active && !runsInMulti(cmd.Name) {
		c.queue(cmd, args)
		return
	}
	if c.W.Proto == 2 && c.Conn.Subscribed() && !subscribedModeAllows(cmd.Name) {
		c.W.Error("ERR Can't execute '" + cmd.FullName() + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
		return
	}
	cmd.calls.Add(1)
	c.cmd = cmd
	if cmd.Machine != nil {
		c.apply(cmd, args)
		return
	}
	// A replicated connection's machine commands wait in its batch; a
	// surface command after them (KEYS, SCAN, INFO …) must see their
	// effects, as on one node: replies and effects in the order sent.
	c.Settle()
	cmd.Run(c, args)
}

// apply hands a state machine command to the Applier. Whether a journaled
// change can reach the disk is decided here, before the apply.
func (c *Ctx) apply(cmd *Command, args [][]byte) {
	if cmd.Machine.Journaled {
		if msg := c.Env.durableErr(); msg != "" {
			c.refuse(machine.ReasonNotNow, msg)
			return
		}
	}
	if c.Env.Applier != nil {
		// Only well-formed commands enter the log: a malformed one gets
		// the error a single node gives, and costs no entry.
		if bad := cmd.Machine.Check(args); bad != "" {
			c.refuse(machine.ReasonInvalid, bad)
			return
		}
	}
	if b, ok := c.Env.Applier.(Batcher); ok {
		c.deferApply(b, cmd, args)
		return
	}
	if cmd.denyOOM && c.refusedOOM(cmd, args) {
		return
	}
	var out machine.Outcome
	if c.Env.Applier != nil {
		out = c.Env.Applier.Apply(c.Now(), cmd.Machine, args, c.W)
	} else {
		out = c.Env.Machine.ApplyScratch(&c.scratch, c.Now(), cmd.Machine, args, c.W)
	}
	c.settled(out)
	c.Env.decided(cmd, args, out, out.Err == "")
	c.journaled(out.Ticket)
}

// decided counts a machine command's outcome: allowed or refused, by rule,
// and a refusal's event. answered: the reply is not an error.
func (e *Env) decided(cmd *Command, args [][]byte, out machine.Outcome, answered bool) {
	cmd.decided(out, answered)
	e.Stats.Rules.count(out)
	if out.Limited {
		e.refusedOutcome(cmd, args, out)
	}
}

// machineCommands lists m's commands as the surface describes them.
func machineCommands(m *machine.Machine) []*Command {
	var cmds []*Command
	for _, mc := range m.Commands() {
		if mc.Internal() || mc.FromMember() {
			continue // no client door knows them
		}
		cmds = append(cmds, &Command{Spec: mc.Spec, Machine: mc, denyOOM: mc.HasFlag("denyoom")})
		if mc.MovableKeys() {
			cmds[len(cmds)-1].KeysOf = mc.KeysOf
		}
	}
	return cmds
}
