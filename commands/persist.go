package commands

import (
	"errors"

	"github.com/sluice-rl/sluice/quota"
)

// Durability is where commands send the changes that must outlive the
// process: quota states are written through to disk as they change (other
// kinds are only snapshotted). Every method is called under the lock of the
// slot the change is in (Flushed under every slot's lock), must not do I/O,
// and returns a Ticket the command hands to its connection; the server
// waits for it before the reply leaves (see Conn.AwaitDurable).
type Durability interface {
	// QuotaChanged records key's new state.
	QuotaChanged(key []byte, st *quota.State) Ticket
	// QuotaDeleted records that quota key key was deleted.
	QuotaDeleted(key []byte) Ticket
	// Flushed records that every key was dropped.
	Flushed() Ticket
	// Err is why quota changes can no longer reach the disk, or nil;
	// commands refuse quota writes while it is set.
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

// DurableWaiter is what a Ticket waits on.
type DurableWaiter interface {
	// Wait blocks until change seq is as durable as a reply requires.
	Wait(seq uint64) error
}

// Ticket is a journaled change that a reply may have to wait for. The zero
// Ticket has nothing to wait for.
type Ticket struct {
	w   DurableWaiter
	seq uint64
}

// NewTicket is the ticket for change seq of w; seq 0 needs no wait.
func NewTicket(w DurableWaiter, seq uint64) Ticket {
	if seq == 0 {
		return Ticket{}
	}
	return Ticket{w: w, seq: seq}
}

// Pending reports whether there is something to wait for.
func (t Ticket) Pending() bool { return t.w != nil }

// Wait blocks until the change is durable.
func (t Ticket) Wait() error {
	if t.w == nil {
		return nil
	}
	return t.w.Wait(t.seq)
}

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

func (e *Env) quotaChanged(key []byte, st *quota.State) Ticket {
	if e.Durable == nil {
		return Ticket{}
	}
	return e.Durable.QuotaChanged(key, st)
}

func (e *Env) quotaDeleted(key []byte) Ticket {
	if e.Durable == nil {
		return Ticket{}
	}
	return e.Durable.QuotaDeleted(key)
}

// durableErr is why quota writes are refused, or "".
func (e *Env) durableErr() string {
	if e.Durable == nil {
		return ""
	}
	if err := e.Durable.Err(); err != nil {
		return errorReply(err)
	}
	return ""
}

// flushAll drops every key, journaling the flush while every slot is
// locked so it is ordered exactly among the quota changes around it.
func (c *Ctx) flushAll() {
	var t Ticket
	c.Env.Keys.FlushAll(func() {
		if c.Env.Durable != nil {
			t = c.Env.Durable.Flushed()
		}
	})
	c.journaled(t)
}

// WriteCalls counts the runs of commands flagged "write": the keyspace
// changes INFO's rdb_changes_since_last_save counts from (refused requests
// included, so it is an upper bound).
func (t *Table) WriteCalls() int64 {
	var n int64
	for _, c := range t.sorted {
		for _, f := range c.Flags {
			if f == "write" {
				n += c.Calls()
				break
			}
		}
	}
	return n
}

func persistCommands() []*Command {
	return []*Command{
		{Name: "save", Arity: 1, Flags: []string{"admin", "noscript", "no_async_loading", "no_multi"}, Group: "server",
			Since: "1.0.0", Complexity: "O(N) where N is the total number of keys",
			Summary: "Writes a snapshot of every key to the data directory before replying.",
			Tips:    []string{"request_policy:all_nodes", "response_policy:all_succeeded"}, Run: runSave},
		{Name: "bgsave", Arity: -1, Flags: []string{"admin", "noscript", "no_async_loading"}, Group: "server",
			Since: "1.0.0", Complexity: "O(1) to start; the snapshot is O(N)",
			Summary: "Writes a snapshot of every key to the data directory in the background.",
			Tips:    []string{"request_policy:all_nodes", "response_policy:all_succeeded"},
			Args:    []Arg{{Name: "schedule", Type: "pure-token", Token: "SCHEDULE", Optional: true}}, Run: runBGSave},
		{Name: "lastsave", Arity: 1, Flags: []string{"loading", "stale", "fast"}, Group: "server",
			Since: "1.0.0", Complexity: "O(1)", Summary: "Returns the Unix time of the last successful snapshot.",
			Tips: []string{"nondeterministic_output"}, Run: runLastSave},
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
