package commands

import (
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/resp"
)

// Transactions, as Redis has them: MULTI queues the connection's commands
// (a command that does not exist or has the wrong arity, or would be
// redirected, is refused at once and makes EXEC answer EXECABORT), EXEC
// runs them and answers the array of their replies, DISCARD drops them;
// WATCH makes EXEC answer nil, running nothing, when a watched key has
// changed since.
//
// EXEC sends the queued limiter and key commands to the machine as one
// internal command (machine/tx.go): one log entry when replicated, applied
// with every slot it touches locked, so no other client's command comes
// between them, on one node or many. The watched keys' versions go with
// it and are compared in that same apply. A queued command its own check
// refuses (CL.THROTTLE k x 1 1) answers its error in its place, as a
// runtime error does in Redis, and the others run. Surface commands queued
// in a transaction (PING, INFO, KEYS …) run after its limiter and key
// commands, their replies in place.

// txState is a connection's transaction: what MULTI queued and what WATCH
// watches.
type txState struct {
	active bool
	// dirty: a command was refused while queuing; EXEC aborts.
	dirty bool
	// queued are copies of the commands' arguments, cmds their commands;
	// bytes counts the arguments' bytes. full is the reason the queue
	// refused a command (it is bounded: MaxTxBytes, machine.MaxTxCommands).
	queued [][][]byte
	cmds   []*Command
	bytes  int
	full   string
	// watched are keys with the versions WATCH read (Machine.KeyVersion).
	watched [][2][]byte
}

// MaxTxBytes bounds the argument bytes a connection's MULTI queue holds:
// the command that would cross it (or machine.MaxTxCommands) is refused
// while queuing, and EXEC aborts with the reason, as Redis aborts a
// transaction after a queuing error.
const MaxTxBytes = 32 << 20

// reset ends the transaction and forgets the watched keys.
func (t *txState) reset() { *t = txState{} }

func txCommands() []*Command {
	return []*Command{
		{Spec: cmdspec.Spec{Name: "multi", Arity: 1, Flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, Group: "transactions",
			Since: "1.2.0", Complexity: "O(1)", Summary: "Starts a transaction."}, Run: runMulti},
		{Spec: cmdspec.Spec{Name: "exec", Arity: 1, Flags: []string{"noscript", "loading", "stale", "skip_slowlog"}, Group: "transactions",
			Since: "1.2.0", Complexity: "Depends on commands in the transaction", Summary: "Executes all commands in a transaction."}, Run: runExec},
		{Spec: cmdspec.Spec{Name: "discard", Arity: 1, Flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, Group: "transactions",
			Since: "2.0.0", Complexity: "O(N), when N is the number of queued commands", Summary: "Discards a transaction."}, Run: runDiscard},
		{Spec: cmdspec.Spec{Name: "watch", Arity: -2, Flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, Group: "transactions",
			FirstKey: 1, LastKey: -1, Step: 1, KeyFlags: []string{"RO"},
			Since: "2.2.0", Complexity: "O(1) for every key.", Summary: "Monitors changes to keys to determine the execution of a transaction.",
			Args: []Arg{{Name: "key", Type: "key", Multiple: true}}}, Run: runWatch},
		{Spec: cmdspec.Spec{Name: "unwatch", Arity: 1, Flags: []string{"noscript", "loading", "stale", "fast", "allow_busy"}, Group: "transactions",
			Since: "2.2.0", Complexity: "O(1)", Summary: "Forgets about watched keys of a transaction."}, Run: runUnwatch},
	}
}

// runsInMulti reports the commands that act at once inside MULTI rather
// than being queued, as in Redis.
func runsInMulti(name string) bool {
	switch name {
	case "exec", "discard", "multi", "watch", "quit", "reset":
		return true
	}
	return false
}

// queue adds a command to the transaction and answers QUEUED; a command
// this node would redirect is refused (and the transaction with it), as a
// cluster node refuses a key it does not serve.
func (c *Ctx) queue(cmd *Command, args [][]byte) {
	tx := &c.Conn.tx
	if cmd.Machine != nil {
		if b, ok := c.Env.Applier.(Batcher); ok {
			if to := b.Redirect(cmd.Machine, args); to != nil {
				tx.dirty = true
				c.W.Error(to.Reply)
				return
			}
		}
		// Over maxmemory a command that would store more is refused as
		// it is queued, and EXEC then aborts, as in Redis.
		if cmd.denyOOM && c.refusedOOM(cmd, args) {
			return
		}
	}
	size := 0
	for _, a := range args {
		size += len(a)
	}
	switch {
	case tx.full != "":
	case len(tx.queued) >= machine.MaxTxCommands:
		tx.full = "ERR MULTI queue full: at most " + strconv.Itoa(machine.MaxTxCommands) + " commands in one transaction"
	case tx.bytes+size > MaxTxBytes:
		tx.full = "ERR MULTI queue full: at most " + strconv.Itoa(MaxTxBytes>>20) + " MiB of arguments in one transaction"
	}
	if tx.full != "" {
		tx.dirty = true
		c.W.Error(tx.full)
		return
	}
	// One allocation holds the copies of every argument.
	buf := make([]byte, 0, size)
	cp := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		cp[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	tx.bytes += size
	tx.queued = append(tx.queued, cp)
	tx.cmds = append(tx.cmds, cmd)
	c.W.Simple("QUEUED")
}

// txRefused marks the transaction, if one is open, as refused: the
// command being queued failed its checks.
func (c *Ctx) txRefused() {
	if c.Conn.tx.active {
		c.Conn.tx.dirty = true
	}
}

func runMulti(c *Ctx, _ [][]byte) {
	if c.Conn.tx.active {
		c.W.Error("ERR MULTI calls can not be nested")
		return
	}
	c.Conn.tx.active = true
	c.W.OK()
}

func runDiscard(c *Ctx, _ [][]byte) {
	if !c.Conn.tx.active {
		c.W.Error("ERR DISCARD without MULTI")
		return
	}
	c.Conn.tx.reset()
	c.W.OK()
}

func runUnwatch(c *Ctx, _ [][]byte) {
	c.Conn.tx.watched = nil
	c.W.OK()
}

// runWatch records the keys' versions now; on a replicated node only the
// leader's are the truth, so a follower redirects.
func runWatch(c *Ctx, args [][]byte) {
	if c.Conn.tx.active {
		c.W.Error("ERR WATCH inside MULTI is not allowed")
		return
	}
	if b, ok := c.Env.Applier.(Batcher); ok {
		if to := b.RedirectKey(args[1]); to != nil {
			c.W.Error(to.Reply)
			return
		}
	}
	for _, k := range args[1:] {
		v := c.Env.Machine.KeyVersion(k, c.Now())
		c.Conn.tx.watched = append(c.Conn.tx.watched, [2][]byte{append([]byte(nil), k...), []byte(v)})
	}
	c.W.OK()
}

// runExec runs the transaction (see above).
func runExec(c *Ctx, _ [][]byte) {
	tx := c.Conn.tx
	c.Conn.tx.reset()
	switch {
	case !tx.active:
		c.W.Error("ERR EXEC without MULTI")
		return
	case tx.full != "":
		c.W.Error("EXECABORT Transaction discarded because of previous errors: " + strings.TrimPrefix(tx.full, "ERR ") + ".")
		return
	case tx.dirty:
		c.W.Error("EXECABORT Transaction discarded because of previous errors.")
		return
	}
	// The machine's commands, checked, go as one group; each queued
	// command is answered from it, by its own check's error, or (a
	// surface command) by running it after the group.
	const (
		inGroup = iota
		refused
		surface
	)
	kinds := make([]int, len(tx.queued))
	errs := make([]string, len(tx.queued))
	group := [][]byte{[]byte("EXEC"), strconv.AppendInt(nil, int64(len(tx.watched)), 10)}
	for _, w := range tx.watched {
		group = append(group, w[0], w[1])
	}
	members := 0
	for i, cmd := range tx.cmds {
		args := tx.queued[i]
		switch {
		case cmd.Machine == nil:
			kinds[i] = surface
			continue
		case cmd.Machine.Journaled && c.Env.durableErr() != "":
			kinds[i], errs[i] = refused, c.Env.durableErr()
			continue
		}
		if bad := cmd.Machine.Check(args); bad != "" {
			kinds[i], errs[i] = refused, bad
			continue
		}
		group = append(group, strconv.AppendInt(nil, int64(len(args)), 10))
		group = append(group, args...)
		members++
		cmd.calls.Add(1)
	}
	// A redirect names the slot of the transaction's first key: a watched
	// one, else the first queued command's.
	var key []byte
	if len(tx.watched) > 0 {
		key = tx.watched[0][0]
	}
	for i, cmd := range tx.cmds {
		if key == nil && kinds[i] == inGroup {
			key = commandKey(cmd.Machine, tx.queued[i])
		}
	}
	var replies [][]byte
	if members > 0 || len(tx.watched) > 0 {
		reply, out, errReply := c.applyTx(group, key)
		switch {
		case errReply != "":
			c.W.Error(errReply)
			return
		case out.Err != "":
			// The machine refused the whole transaction; nothing ran.
			c.W.Error(out.Err)
			return
		case out.Parts == nil:
			c.W.NullArray() // a watched key changed: nothing ran
			return
		}
		for k := 0; k+1 < len(out.Parts); k++ {
			replies = append(replies, reply[out.Parts[k]:out.Parts[k+1]])
		}
	}
	c.W.Array(len(tx.queued))
	k := 0
	for i, cmd := range tx.cmds {
		switch kinds[i] {
		case inGroup:
			if k < len(replies) {
				c.W.Buf = appendMachineReply(c.W.Buf, c.W.Proto, replies[k])
			} else {
				c.W.Error("ERR internal error in exec: a reply is missing")
			}
			k++
		case refused:
			c.W.Error(errs[i])
		case surface:
			cmd.calls.Add(1)
			cmd.Run(c, tx.queued[i])
		}
	}
}

// applyTx applies a transaction's group and returns its reply (RESP2) and
// outcome (Parts: where each of its elements is), or the one error reply
// the whole EXEC gets (a redirect, a failed log).
func (c *Ctx) applyTx(group [][]byte, key []byte) ([]byte, machine.Outcome, string) {
	execCmd := c.Env.Table.txExec.Machine
	if b, ok := c.Env.Applier.(Batcher); ok {
		if to := b.RedirectKey(key); to != nil {
			return nil, machine.Outcome{}, to.Reply
		}
		reply, err := b.ApplyAll([][][]byte{group})
		if err != nil {
			return nil, machine.Outcome{}, b.ErrorReply(err, key).Error()
		}
		r, out := reply(0)
		return r, out, ""
	}
	w := resp.Writer{Proto: 2}
	var out machine.Outcome
	if c.Env.Applier != nil {
		out = c.Env.Applier.Apply(c.Now(), execCmd, group, &w)
	} else {
		out = c.Env.Machine.ApplyScratch(&c.scratch, c.Now(), execCmd, group, &w)
	}
	c.journaled(out.Ticket)
	return w.Buf, out, ""
}
