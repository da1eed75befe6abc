package machine

import (
	"sync/atomic"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/slot"
)

// Command is one command the machine applies: what COMMAND reports about
// it, and the function that applies it. The server surface (package
// commands) lists these beside its own, so COMMAND describes them all.
type Command struct {
	// Spec is what COMMAND says of it: its name, arity, flags, key
	// positions and docs. "write" in Flags decides whether an apply moves
	// the applied instant.
	cmdspec.Spec
	// Journaled marks commands whose changes are written through to the
	// durable store. Whether the store can take a change is decided before
	// the apply, by the caller, never inside it.
	Journaled bool
	// Decides marks the limiter commands: their reply is a decision,
	// allowed or limited (metrics count both).
	Decides bool

	run func(x *exec, args [][]byte)
	// check parses args as run does and returns the error reply a
	// malformed command gets, or "": what can be known without the state.
	// nil: nothing to check beyond the arity.
	check func(args [][]byte) string
	// route, when set, is the key a call is routed by when it is not its
	// first (RL.LEASE's counter, which the machine's rules name): nil
	// from it falls back to the first.
	route func(args [][]byte) []byte
	// stores, when set, is Machine.Stores for the command: whether an
	// apply could add or grow a record. nil: it stores when one of its
	// keys holds no record.
	stores func(m *Machine, args [][]byte, now int64) bool
	// keys, for a command whose keys are not at fixed positions
	// (movablekeys), finds their indexes in args (COMMAND GETKEYS).
	keys func(args [][]byte) []int
	// slots, for a command whose records are not (only) at its key
	// arguments' slots, names the slots its apply locks — all of them
	// when all is set. nil: the slots of its keys. A transaction locks
	// what this declares before the apply.
	slots func(args [][]byte) (slots []int, all bool)
	// subcommands are the lower-case subcommand words, when the command
	// has them (they name it in an internal error: "rl.rules|list").
	subcommands []string
	// everyGroup commands are configuration every group of a sharded
	// cluster applies (rules, overrides, scale): they are not fenced.
	everyGroup bool
	// internal commands are not part of the server surface: the front door
	// that sends them (DEBUG APPLY-PANIC) is a surface command of its own.
	internal bool
	// fromMember commands are sent by one member to another's group (a
	// check's part, a slot's import): only the member channel (package
	// member) carries them; no client door knows them. Unlike internal
	// ones they are fenced as any command.
	fromMember bool
	write      bool
	// panics counts recovered panics: [0] the command without a known
	// subcommand, [i+1] subcommands[i].
	panics []atomic.Int64
}

// Arg documents one argument for COMMAND DOCS.
type Arg = cmdspec.Arg

// Write reports whether the command may change state.
func (c *Command) Write() bool { return c.write }

// ArityOK reports whether n words (the name included) fit the arity.
func (c *Command) ArityOK(n int) bool {
	if c.Arity >= 0 {
		return n == c.Arity
	}
	return n >= -c.Arity
}

// Internal reports a command that is not part of the server surface (the
// surface reaches it through a command of its own, as DEBUG APPLY-PANIC).
func (c *Command) Internal() bool { return c.internal }

// FromMember reports a command only members send each other (package
// member): no client door answers it.
func (c *Command) FromMember() bool { return c.fromMember }

// Check is Machine.Check for args already known to be this command's, of
// a valid arity: "" or the error reply.
func (c *Command) Check(args [][]byte) (bad string) {
	if c.check == nil {
		return ""
	}
	// A check is parsing only; should one panic, the command is malformed
	// as far as the log is concerned, and the apply would panic alike.
	defer func() {
		if p := recover(); p != nil {
			bad = internalErrorPrefix + c.panicName(args)
		}
	}()
	return c.check(args)
}

// KeysOf returns the indexes of the keys in a call of a command whose keys
// move (movablekeys); nil for the others, whose keys FirstKey, LastKey and
// Step give.
func (c *Command) KeysOf(args [][]byte) []int {
	if c.keys == nil {
		return nil
	}
	return c.keys(args)
}

// EveryGroup reports configuration every group of a sharded cluster
// applies (rules, overrides, scale).
func (c *Command) EveryGroup() bool { return c.everyGroup }

// MultiKey reports whether a call may name more than one key.
func (c *Command) MultiKey() bool { return c.keys != nil || c.LastKey < 0 || c.LastKey > c.FirstKey }

// MovableKeys reports whether the command finds its keys with KeysOf.
func (c *Command) MovableKeys() bool { return c.keys != nil }

// Keys returns the indexes in args of the command's keys: what COMMAND
// GETKEYS reports, what a cluster client routes by, and (unless the slots
// declaration says more) the slots a transaction locks for it. It reads
// the one declaration: keys for a command whose keys move, else FirstKey,
// LastKey and Step.
func (c *Command) Keys(args [][]byte) []int {
	if c.keys != nil {
		return c.keys(args)
	}
	if c.FirstKey <= 0 || c.Step <= 0 {
		return nil
	}
	last := c.LastKey
	if last < 0 {
		last += len(args)
	}
	var keys []int
	for i := c.FirstKey; i <= last && i < len(args); i += c.Step {
		keys = append(keys, i)
	}
	return keys
}

// RouteKey is the key a call is routed by, its first (nil when it has
// none): a redirect names its slot.
func (c *Command) RouteKey(args [][]byte) []byte {
	if c.route != nil {
		if k := c.route(args); k != nil {
			return k
		}
	}
	if c.keys == nil {
		if c.FirstKey > 0 && c.FirstKey < len(args) {
			return args[c.FirstKey]
		}
		return nil
	}
	if keys := c.keys(args); len(keys) > 0 {
		return args[keys[0]]
	}
	return nil
}

// Slots appends to dst the slots the command's apply may touch, as its
// table entry declares them: its slots declaration, else the slots of its
// keys; all reports that it may touch any slot.
func (c *Command) Slots(dst []int, args [][]byte) (slots []int, all bool) {
	if c.slots != nil {
		s, all := c.slots(args)
		return append(dst, s...), all
	}
	for _, i := range c.Keys(args) {
		dst = append(dst, slot.Of(args[i]))
	}
	return dst, false
}
