package commands

import (
	"context"
	"errors"
	"strings"

	"github.com/sluice-rl/sluice/crossgroup"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/resp"
)

// Batcher is an Applier that applies a connection's machine commands
// together: all those of one read batch (a pipeline) go into one log
// entry, and the connection waits once.
type Batcher interface {
	Applier
	// Redirect is the refusal of a command this node cannot log now (a
	// follower: MOVED), or nil when it can.
	Redirect(cmd *machine.Command, args [][]byte) *machine.Redirect
	// RedirectKey is Redirect for a command asking about key.
	RedirectKey(key []byte) *machine.Redirect
	// ApplyAll logs cmds as one group and waits. It returns each command's
	// reply (RESP2) and outcome (whether a limiter refused it, its typed
	// result), or why the group did not apply (or may not have).
	ApplyAll(cmds [][][]byte) (reply func(i int) ([]byte, machine.Outcome), err error)
	// ErrorReply is the error reply (its Error text) to a command asking
	// about key (nil: none) whose group ApplyAll failed with err: a
	// *machine.Redirect naming key's slot when nothing was applied.
	ErrorReply(err error, key []byte) error
}

// deferredBatch is a connection's machine commands waiting for Settle, and
// where in the reply buffer each reply belongs.
type deferredBatch struct {
	b Batcher
	// The queued commands' arguments are copied (the server reuses the
	// slices it hands out, and inline words, before the batch settles):
	// their bytes back to back in flat, each argument's length in lens,
	// each command's argument count in nargs. views and cmds are rebuilt
	// over flat at Settle; all five are reused from batch to batch.
	flat  []byte
	lens  []int
	nargs []int
	views [][]byte
	cmds  [][][]byte
	of    []*Command
	pos   []int
	// across marks the checks whose counters reach another group of a
	// sharded cluster: Env.CrossGroup answers them, not the log; everywhere
	// the configuration changes every group applies after this one.
	across     []bool
	everywhere []bool
	// spare is the buffer replies are rebuilt in, swapped with W.Buf.
	spare []byte
	// local are the commands for the log (those not across), reused.
	local [][][]byte
}

// deferApply queues cmd for the batch, or answers at once with a redirect.
func (c *Ctx) deferApply(b Batcher, cmd *Command, args [][]byte) {
	if to := b.Redirect(cmd.Machine, args); to != nil {
		c.W.Error(to.Reply)
		c.settled(refusedOutcome(to))
		return
	}
	if cmd.denyOOM && c.refusedOOM(cmd, args) {
		return
	}
	d := &c.batch
	d.b = b
	for _, a := range args {
		d.flat = append(d.flat, a...)
		d.lens = append(d.lens, len(a))
	}
	d.nargs = append(d.nargs, len(args))
	d.of = append(d.of, cmd)
	d.pos = append(d.pos, len(c.W.Buf))
	d.across = append(d.across, c.spansGroups(cmd, args))
	d.everywhere = append(d.everywhere, c.Env.CrossGroup != nil && cmd.Machine.EveryGroup() && configChange(args))
}

// spansGroups reports a command the cross-group coordinator runs: a check
// or reservation whose counters, or a settle whose reservation's parts,
// sit in other groups too.
func (c *Ctx) spansGroups(cmd *Command, args [][]byte) bool {
	cg := c.Env.CrossGroup
	if cg == nil {
		return false
	}
	switch cmd.Name {
	case "rl.check", "rl.shouldratelimit":
		return cg.Spans(args)
	case "rl.reserve":
		return cg.ReserveSpans(args)
	case "rl.settle", "rl.cancel":
		return cg.SettleSpans(args)
	}
	return false
}

// configChange reports a configuration command that changes something
// (RL.RULES LOAD/CLEAR, RL.OVERRIDE SET/DEL, RL.SCALE SET), not a read.
// RL.RULES LOAD-FILES is each group's leader's own.
func configChange(args [][]byte) bool {
	if len(args) < 2 {
		return false
	}
	for _, sub := range []string{"load", "clear", "set", "del"} {
		if resp.EqualFold(args[1], sub) {
			return true
		}
	}
	return false
}

// queued rebuilds the queued commands as argument slices over flat.
func (d *deferredBatch) queued() [][][]byte {
	d.views = d.views[:0]
	off := 0
	for _, l := range d.lens {
		d.views = append(d.views, d.flat[off:off+l:off+l])
		off += l
	}
	d.cmds = d.cmds[:0]
	at := 0
	for _, n := range d.nargs {
		d.cmds = append(d.cmds, d.views[at:at+n:at+n])
		at += n
	}
	return d.cmds
}

// WouldWait reports whether dispatching cmd may block: a command that
// waits by nature (Command.Waits), EXEC on a replicated node (its group
// goes through the log), or a surface command on a replicated node after
// machine commands of the same batch (Dispatch settles them first). The
// server's event loop runs such a command, and the rest of its batch, off
// the loop. Machine commands never wait here: they queue until Settle.
// cmd is Table.Lookup(args[0]).
func (c *Ctx) WouldWait(cmd *Command) bool {
	switch {
	case cmd == nil:
		return false
	case cmd.Waits:
		return true
	}
	if _, replicated := c.Env.Applier.(Batcher); !replicated {
		return false
	}
	if c.Conn.tx.active && !runsInMulti(cmd.Name) {
		return false // queued
	}
	return cmd.Name == "exec" || (cmd.Machine == nil && c.Unsettled())
}

// Unsettled reports whether the batch holds machine commands that Settle
// has yet to apply (and wait for).
func (c *Ctx) Unsettled() bool { return len(c.batch.nargs) > 0 }

// Settle applies the machine commands the connection's batch queued, and
// puts each reply where its command stood among the others'. The server
// calls it once per read batch, before the replies are sent; it does
// nothing when nothing was queued.
func (c *Ctx) Settle() {
	d := &c.batch
	if len(d.nargs) == 0 {
		return
	}
	cmds := d.queued()
	// The checks across groups are the coordinator's; the rest go through
	// the log together.
	d.local = d.local[:0]
	for i, cmd := range cmds {
		if !d.across[i] {
			d.local = append(d.local, cmd)
		}
	}
	var reply func(int) ([]byte, machine.Outcome)
	var err error
	if len(d.local) > 0 {
		reply, err = d.b.ApplyAll(d.local)
	}
	out := d.spare[:0]
	prev := 0
	k := 0 // the next local command's index
	for i, pos := range d.pos {
		out = append(out, c.W.Buf[prev:pos]...)
		prev = pos
		if d.across[i] {
			out = c.crossGroup(out, d.of[i], cmds[i])
			continue
		}
		j := k
		k++
		if err != nil {
			e := d.b.ErrorReply(err, commandKey(d.of[i].Machine, d.cmds[i]))
			out = appendError(out, c.W.Proto, e.Error())
			c.settled(refusedOutcome(e))
			continue
		}
		r, o := reply(j)
		if msg, why := c.rulesDiffer(d.of[i], cmds[i], o); msg != "" {
			out = appendError(out, c.W.Proto, msg)
			c.settled(machine.Outcome{Err: msg, Reason: why})
			continue
		}
		if d.everywhere[i] && o.Err == "" {
			if perr := c.Env.CrossGroup.Propagate(context.Background(), cmds[i]); perr != nil {
				msg := "ERR applied in this group, not yet in every group (send it again): " + perr.Error()
				out = appendError(out, c.W.Proto, msg)
				c.settled(machine.Outcome{Err: msg, Reason: machine.ReasonNotNow})
				continue
			}
		}
		out = appendMachineReply(out, c.W.Proto, r)
		c.settled(o)
		c.Env.decided(d.of[i], d.cmds[i], o, o.Err == "")
	}
	out = append(out, c.W.Buf[prev:]...)
	d.spare, c.W.Buf = c.W.Buf[:0], out
	clear(d.of)
	clear(d.local)
	d.flat, d.lens, d.nargs, d.of, d.pos, d.across = d.flat[:0], d.lens[:0], d.nargs[:0], d.of[:0], d.pos[:0], d.across[:0]
	d.everywhere = d.everywhere[:0]
}

// crossGroup answers an RL.CHECK, RL.SHOULDRATELIMIT or RL.RESERVE
// across groups, or an RL.SETTLE or RL.CANCEL of a reservation held
// across groups, through the coordinator, appending its reply to out, and
// counts it as the log's would be.
func (c *Ctx) crossGroup(out []byte, cmd *Command, args [][]byte) []byte {
	if cmd.Name == "rl.settle" || cmd.Name == "rl.cancel" {
		return c.settleAcross(out, args)
	}
	run := c.Env.CrossGroup.Decide
	if cmd.Name == "rl.reserve" {
		run = c.Env.CrossGroup.Reserve
	}
	res, err := run(context.Background(), args)
	if err != nil {
		return c.acrossFailed(out, args, err)
	}
	w := Writer{Buf: out, Proto: c.W.Proto}
	o := machine.Outcome{Limited: res.Limited}
	if cmd.Name == "rl.shouldratelimit" {
		machine.WriteRLS(&w, res.Limited, res.Statuses)
		o.Statuses = res.Statuses
	} else {
		machine.WriteCheck(&w, res.Check)
		o.Check, o.Checked = res.Check, true
		if res.Limited {
			o.Limit, o.RetryAfter = res.Check.Limit, res.Check.RetryAfter
		}
	}
	c.settled(o)
	c.Env.decided(cmd, args, o, true)
	return w.Buf
}

// settleAcross answers an RL.SETTLE or RL.CANCEL of a reservation held
// across groups.
func (c *Ctx) settleAcross(out []byte, args [][]byte) []byte {
	rows, held, err := c.Env.CrossGroup.Settle(context.Background(), args)
	if err != nil {
		return c.acrossFailed(out, args, err)
	}
	w := Writer{Buf: out, Proto: c.W.Proto}
	if held {
		machine.WriteSettle(&w, rows)
	} else {
		w.Null()
	}
	c.settled(machine.Outcome{Settled: rows})
	return w.Buf
}

// acrossFailed appends the error reply to a command across groups that
// failed.
func (c *Ctx) acrossFailed(out []byte, args [][]byte, err error) []byte {
	// Nothing admitted: the parts charged elsewhere are being given back.
	var msg string
	var refusal *machine.Redirect // TRYAGAIN or CLUSTERDOWN: nothing was applied
	var conflict *crossgroup.SlotConflictError
	why := machine.ReasonInvalid
	switch {
	case errors.Is(err, crossgroup.ErrOutcomeUnknown):
		// First: an outcome unknown may wrap a group without a leader
		// (the reservation's head not kept while its parts hold their
		// charge), which must not be answered "nothing applied".
		msg = "ERR the outcome is unknown: a group this command was sent to did not answer (it may have applied it): " + err.Error()
		why = machine.ReasonUnknown
	case errors.Is(err, crossgroup.ErrSettledInPart):
		msg = "ERR the reservation was settled in part, not in every group (the same " + strings.ToUpper(string(args[0])) +
			" again settles the rest): " + err.Error()
		why = machine.ReasonNotNow
	case errors.Is(err, crossgroup.ErrNoLeader):
		refusal = machine.ClusterDown("a group this command spans has no leader: " + err.Error())
	case errors.As(err, &conflict):
		refusal = machine.ClusterDown(conflictWhy(conflict.Described))
	case errors.Is(err, crossgroup.ErrRulesDiffer):
		msg = "ERR the groups hold different rules for this domain (load them again): " + err.Error()
		why = machine.ReasonRulesDiffer
	case errors.Is(err, crossgroup.ErrHeldOther):
		msg = machine.HeldWithOtherArgs(args[2])
	default:
		refusal = machine.TryAgain("the command spans groups and one of them could not decide: " + err.Error())
	}
	if refusal != nil {
		msg, why = refusal.Reply, machine.ReasonNotNow
	}
	c.settled(machine.Outcome{Err: msg, Refusal: refusalOf(refusal), Reason: why})
	return appendError(out, c.W.Proto, msg)
}

// rulesDiffer is, for an RL.RULES LIST answered in a sharded cluster, the
// error that says the groups hold different rules (the list would be only
// this group's), and why, or "".
func (c *Ctx) rulesDiffer(cmd *Command, args [][]byte, out machine.Outcome) (string, machine.Reason) {
	if c.Env.CrossGroup == nil || cmd.Name != "rl.rules" || len(args) < 2 || !resp.EqualFold(args[1], "list") || out.Err != "" {
		return "", machine.ReasonNone
	}
	domain := ""
	if len(args) == 3 {
		domain = string(args[2])
	}
	differ, err := c.Env.CrossGroup.RulesDiffer(context.Background(), domain)
	switch {
	case err != nil:
		return "TRYAGAIN could not compare the groups' rules: " + err.Error(), machine.ReasonNotNow
	case differ != "":
		return "ERR RULESDIFFER the groups hold different rules (load them again through any node): " + differ, machine.ReasonRulesDiffer
	}
	return "", machine.ReasonNone
}

func appendError(dst []byte, proto int, msg string) []byte {
	w := Writer{Buf: dst, Proto: proto}
	w.Error(msg)
	return w.Buf
}

// appendMachineReply appends a reply the log produced in RESP2 in the
// connection's protocol: machine replies differ between the two only in a
// top-level null.
func appendMachineReply(dst []byte, proto int, reply []byte) []byte {
	if proto == 3 && (string(reply) == "$-1\r\n" || string(reply) == "*-1\r\n") {
		return append(dst, "_\r\n"...)
	}
	return append(dst, reply...)
}
