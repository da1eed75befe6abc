package machine

import (
	"fmt"
	"runtime/debug"

	"github.com/sluice-rl/sluice/resp"
)

// A panic inside one command's apply must never stop the machine: on a
// replicated node every replica applies the same entry with the same code,
// so a panic that escaped would stop all of them, and each would meet it
// again replaying its log. The boundary is the apply itself: the slots the
// command holds are released, whatever it had written of its reply is
// dropped, and it answers "ERR internal error in <command>" — the same
// bytes on every replica, since a deterministic apply panics at the same
// point of the same command everywhere, leaving the same state behind.

// internalErrorPrefix starts the reply of a command whose apply panicked;
// the command's name follows.
const internalErrorPrefix = "ERR internal error in "

// recovered finishes an apply that panicked with p: locks released, the
// partial reply (from start) replaced by the internal error, the panic
// counted and logged with its stack.
func (m *Machine) recovered(x *exec, cmd *Command, args [][]byte, p any, start int) (reply string) {
	x.unlockAll()
	name, sub := cmd.panicName(args), cmd.subIndex(args)
	x.w.Buf = x.w.Buf[:start]
	reply = internalErrorPrefix + name
	x.w.Error(reply)
	cmd.panics[sub+1].Add(1)
	m.log.Error("command panicked inside its apply; it answered an error and the machine goes on",
		"command", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	return reply
}

// panicName names the command in an internal error: "cl.throttle", or
// "debug|apply-panic" for a command with subcommands.
func (c *Command) panicName(args [][]byte) string {
	if i := c.subIndex(args); i >= 0 {
		return c.Name + "|" + c.subcommands[i]
	}
	return c.Name
}

// subIndex is the index of args' subcommand in c.subcommands, or -1.
func (c *Command) subIndex(args [][]byte) int {
	if len(c.subcommands) > 0 && len(args) > 1 {
		sub := resp.Lower(args[1])
		for i, s := range c.subcommands {
			if s == sub {
				return i
			}
		}
	}
	return -1
}

// Panics counts the applies of this command that panicked, subcommands
// included.
func (c *Command) Panics() int64 {
	var n int64
	for i := range c.panics {
		n += c.panics[i].Load()
	}
	return n
}

// PanicCount is how many applies of one command (or subcommand) panicked.
type PanicCount struct {
	// Command is the name an internal error gives: "cl.throttle",
	// "rl.rules|list".
	Command string
	Count   int64
}

// PanicCounts lists every command and subcommand with its count of
// panicked applies, zeros included, in table order.
func (m *Machine) PanicCounts() []PanicCount {
	var out []PanicCount
	for _, c := range m.sorted {
		if len(c.subcommands) == 0 || c.panics[0].Load() > 0 {
			out = append(out, PanicCount{Command: c.Name, Count: c.panics[0].Load()})
		}
		for i, s := range c.subcommands {
			out = append(out, PanicCount{Command: c.Name + "|" + s, Count: c.panics[i+1].Load()})
		}
	}
	return out
}
