package commands

import (
	"errors"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/machine"
)

// DurableHealth says whether changes can still be made durable: while
// Err is set, Journaled machine commands are refused before they apply
// (the decision is the server's, never the state machine's).
type DurableHealth interface {
	// Err is why quota changes can no longer reach the disk, or nil.
	Err() error
}

// Snapshots answers SAVE, BGSAVE, LASTSAVE and INFO persistence.
type Snapshots interface {
	// Save snapshots the keyspace before returning.
	Save() error
	// BackgroundSave starts a snapshot; with schedule set, one already
	// running is followed by another (started is then false).
	BackgroundSave(schedule bool) (started bool, err error)
	// LastSave is when the last snapshot was taken, Unix seconds.
	LastSave() int64
	// Info is the INFO persistence fields.
	Info() [][2]string
}

// Ticket is a journaled change a reply may have to wait for.
type Ticket = machine.Ticket

// journaled keeps the connection's latest ticket. Changes become durable in
// journal order, so waiting for the latest covers every earlier one, and a
// pipeline of changes waits once.
func (c *Ctx) journaled(t Ticket) {
	if t.Pending() {
		c.Conn.durable = t
	}
}

// DurablePending reports whether a reply written on this connection must
// wait for a change to be durable before it is sent.
func (c *Conn) DurablePending() bool { return c.durable.Pending() }

// AwaitDurable waits until every change this connection made is as durable
// as the fsync policy promises. The server calls it before sending replies
// (once per pipeline is enough), never under a lock. An error means the
// change may not be on disk: the replies must not be sent.
func (c *Conn) AwaitDurable() error {
	t := c.durable
	c.durable = Ticket{}
	return t.Wait()
}

// durableErr is why a Journaled command is refused before it applies,
// or "".
func (e *Env) durableErr() string {
	if e.Durable == nil {
		return ""
	}
	if err := e.Durable.Err(); err != nil {
		return errorReply(err)
	}
	return ""
}

func persistCommands() []*Command {
	return []*Command{
		{Spec: cmdspec.Spec{Name: "save", Arity: 1, Flags: []string{"admin", "noscript", "no_async_loading", "no_multi"}, Group: "server",
			Since: "1.0.0", Complexity: "O(N) where N is the total number of keys",
			Summary: "Writes a snapshot of every key to the data directory before replying.",
			Tips:    []string{"request_policy:all_nodes", "response_policy:all_succeeded"}}, Waits: true, Run: runSave},
		{Spec: cmdspec.Spec{Name: "bgsave", Arity: -1, Flags: []string{"admin", "noscript", "no_async_loading"}, Group: "server",
			Since: "1.0.0", Complexity: "O(1) to start; the snapshot is O(N)",
			Summary: "Writes a snapshot of every key to the data directory in the background.",
			Tips:    []string{"request_policy:all_nodes", "response_policy:all_succeeded"},
			Args:    []Arg{{Name: "schedule", Type: "pure-token", Token: "SCHEDULE", Optional: true}}}, Run: runBGSave},
		{Spec: cmdspec.Spec{Name: "lastsave", Arity: 1, Flags: []string{"loading", "stale", "fast"}, Group: "server",
			Since: "1.0.0", Complexity: "O(1)", Summary: "Returns the Unix time of the last successful snapshot.",
			Tips: []string{"nondeterministic_output"}}, Run: runLastSave},
	}
}

var errNoPersistence = errors.New("commands: persistence is not configured")

func runSave(c *Ctx, _ [][]byte) {
	if c.Env.Snapshots == nil {
		c.W.Error(errorReply(errNoPersistence))
		return
	}
	if err := c.Env.Snapshots.Save(); err != nil {
		c.W.Error(errorReply(err))
		return
	}
	c.W.OK()
}

func runBGSave(c *Ctx, args [][]byte) {
	schedule := false
	if len(args) == 2 && equalFold(args[1], "schedule") {
		schedule = true
	} else if len(args) > 1 {
		c.W.Error(errSyntax)
		return
	}
	if c.Env.Snapshots == nil {
		c.W.Error(errorReply(errNoPersistence))
		return
	}
	started, err := c.Env.Snapshots.BackgroundSave(schedule)
	switch {
	case err != nil:
		c.W.Error(errorReply(err))
	case started:
		c.W.Simple("Background saving started")
	default:
		c.W.Simple("Background saving scheduled")
	}
}

func runLastSave(c *Ctx, _ [][]byte) {
	if c.Env.Snapshots == nil {
		c.W.Int(c.Env.Started / 1e9)
		return
	}
	c.W.Int(c.Env.Snapshots.LastSave())
}

// persistenceInfo is INFO's persistence section.
func (c *Ctx) persistenceInfo() [][2]string {
	fields := [][2]string{{"loading", "0"}, {"async_loading", "0"}}
	if c.Env.Snapshots == nil {
		return append(fields, [2]string{"rdb_bgsave_in_progress", "0"}, [2]string{"aof_enabled", "0"})
	}
	fields = append(fields, c.Env.Snapshots.Info()...)
	return append(fields, [2]string{"aof_rewrite_in_progress", "0"})
}
