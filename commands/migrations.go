package commands

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/slot"
	"github.com/sluice-rl/sluice/slotmove"
)

// Valkey 9's atomic slot migration commands, on a member of a sharded
// cluster: the source group's leader starts and cancels jobs; any member
// lists its group's (package slotmove drives them).

func migrationCommands() []*Command {
	sub := func(name string, arity int, summary string, run func(*Ctx, [][]byte), args ...Arg) *Command {
		return &Command{Spec: cmdspec.Spec{Name: name, Arity: arity, Flags: []string{"admin"}, Group: "cluster",
			Since: "9.0.0", Summary: summary, Complexity: "O(N)", Args: args}, Run: run}
	}
	return []*Command{
		sub("migrateslots", -7, "Moves slot ranges from this group to a target node's group, chunk by chunk (sent to the source group's leader).", runMigrateSlots,
			Arg{Name: "migration", Type: "block", Multiple: true, Sub: []Arg{
				{Name: "range", Type: "block", Token: "SLOTSRANGE", Multiple: true, Sub: []Arg{
					{Name: "start-slot", Type: "integer"}, {Name: "end-slot", Type: "integer"}}},
				{Name: "node-id", Type: "string", Token: "NODE"}}}),
		sub("getslotmigrations", 2, "Lists this group's slot migrations, running and recently ended.", runGetSlotMigrations),
		sub("cancelslotmigrations", 2, "Cancels this group's running slot migrations (a chunk already cut completes).", runCancelSlotMigrations),
		sub("addgroup", -6, "Adds a group of members started with --cluster-join to the running cluster; it owns no slots until some move to it.", runAddGroup,
			Arg{Name: "group-id", Type: "string"},
			Arg{Name: "member", Type: "block", Multiple: true, Sub: []Arg{
				{Name: "member-id", Type: "string"}, {Name: "client-addr", Type: "string"}, {Name: "raft-addr", Type: "string"}}}),
		sub("removegroup", 3, "Removes a group that owns no slots from the running cluster.", runRemoveGroup,
			Arg{Name: "group-id", Type: "string"}),
		sub("sluicemap", 2, "Returns the live cluster map as --cluster-map reads it (what a joining member starts from).", runSluiceMap),
	}
}

// runAddGroup is CLUSTER ADDGROUP <group-id> <member-id> <client-addr>
// <raft-addr> [<member-id> <client-addr> <raft-addr> …].
func runAddGroup(c *Ctx, args [][]byte) {
	if c.Env.Migrations == nil {
		c.W.Error(errNotSharded)
		return
	}
	if (len(args)-3)%3 != 0 {
		c.W.Error("ERR syntax: CLUSTER ADDGROUP <group-id> <member-id> <client-addr> <raft-addr> [<member-id> <client-addr> <raft-addr> …]")
		return
	}
	var members []cluster.Peer
	for i := 3; i+2 < len(args); i += 3 {
		ps, err := cluster.ParsePeers(string(args[i]) + "=" + string(args[i+1]) + "@" + string(args[i+2]))
		if err != nil {
			c.W.Error("ERR member " + string(args[i]) + ": " + err.Error())
			return
		}
		members = append(members, ps...)
	}
	if err := c.Env.Migrations.AddGroup(context.Background(), string(args[2]), members); err != nil {
		c.W.Error(c.migrationError(err))
		return
	}
	c.W.OK()
}

func runRemoveGroup(c *Ctx, args [][]byte) {
	if c.Env.Migrations == nil {
		c.W.Error(errNotSharded)
		return
	}
	if err := c.Env.Migrations.RemoveGroup(context.Background(), string(args[2])); err != nil {
		c.W.Error(c.migrationError(err))
		return
	}
	c.W.OK()
}

func runSluiceMap(c *Ctx, _ [][]byte) {
	if c.Env.Shards == nil {
		c.W.Error(errNotSharded)
		return
	}
	c.W.BulkString(string(c.Env.Shards.Format()))
}

const errNotSharded = "ERR slot migration needs a sharded cluster (--cluster-map)"

// runMigrateSlots is CLUSTER MIGRATESLOTS SLOTSRANGE <start> <end> […]
// NODE <node-id> [SLOTSRANGE … NODE …].
func runMigrateSlots(c *Ctx, args [][]byte) {
	if c.Env.Migrations == nil {
		c.W.Error(errNotSharded)
		return
	}
	specs, bad := parseMigrateSlots(args[2:])
	if bad != "" {
		c.W.Error(bad)
		return
	}
	if err := c.Env.Migrations.Migrate(specs); err != nil {
		c.W.Error(c.migrationError(err))
		return
	}
	c.W.OK()
}

func parseMigrateSlots(args [][]byte) ([]slotmove.Spec, string) {
	const syntax = "ERR syntax: CLUSTER MIGRATESLOTS SLOTSRANGE <start> <end> [<start> <end> …] NODE <node-id> [SLOTSRANGE … NODE …]"
	var specs []slotmove.Spec
	for i := 0; i < len(args); {
		if !equalFold(args[i], "slotsrange") {
			return nil, syntax
		}
		i++
		var sp slotmove.Spec
		for i+1 < len(args) && !equalFold(args[i], "node") {
			from, err1 := strconv.Atoi(string(args[i]))
			to, err2 := strconv.Atoi(string(args[i+1]))
			if err1 != nil || err2 != nil {
				return nil, syntax
			}
			if from < 0 || to >= slot.Count || from > to {
				return nil, "ERR invalid slot range " + string(args[i]) + " " + string(args[i+1]) + ": slots are 0 to 16383, start ≤ end"
			}
			sp.Ranges = append(sp.Ranges, [2]int{from, to})
			i += 2
		}
		if len(sp.Ranges) == 0 || i+1 >= len(args) || !equalFold(args[i], "node") {
			return nil, syntax
		}
		sp.Node = string(args[i+1])
		i += 2
		specs = append(specs, sp)
	}
	if len(specs) == 0 {
		return nil, syntax
	}
	return specs, ""
}

// migrationError is the error reply to a migration or group command that
// failed; one sent to a follower names its group's leader.
func (c *Ctx) migrationError(err error) string {
	switch {
	case errors.Is(err, slotmove.ErrNotLeader):
		where := "send it to a group's leader"
		if n := c.Env.Cluster; n != nil {
			if _, addr, ok := n.Leader(); ok && addr != "" {
				where = "send it to this group's leader, " + addr + ", or another group's"
			}
		}
		return "ERR " + where + ": slot migrations start and are cancelled at the source group's, groups are added and removed at any group's"
	case errors.Is(err, slotmove.ErrNotEverywhere):
		return "ERR " + strings.TrimPrefix(err.Error(), "slotmove: ")
	case errors.Is(err, slotmove.ErrNotFenced):
		return "TRYAGAIN the group is taking its slots from the cluster map"
	case errors.Is(err, slotmove.ErrRefused):
		return "ERR " + strings.TrimPrefix(err.Error(), slotmove.ErrRefused.Error()+": ")
	}
	return errorReply(err)
}

func runCancelSlotMigrations(c *Ctx, _ [][]byte) {
	if c.Env.Migrations == nil {
		c.W.Error(errNotSharded)
		return
	}
	if _, err := c.Env.Migrations.Cancel(); err != nil {
		c.W.Error(c.migrationError(err))
		return
	}
	c.W.OK()
}

// runGetSlotMigrations is one entry per job, a map of Valkey's fields
// (name, operation, slot_ranges, source_node, target_node, create_time,
// last_update_time, state, message) and sluice's (target_group,
// slots_moved, slots_pending — the chunk cut and not yet confirmed —,
// keys_moved, bytes_moved, start_time, end_time, error).
func runGetSlotMigrations(c *Ctx, _ [][]byte) {
	if c.Env.Migrations == nil {
		c.W.Error(errNotSharded)
		return
	}
	jobs := c.Env.Migrations.Jobs()
	c.W.Array(len(jobs))
	for _, j := range jobs {
		errText := ""
		if j.State == machine.JobFailed {
			errText = j.Message
		}
		c.W.Map(17)
		str := func(k, v string) { c.W.BulkString(k); c.W.BulkString(v) }
		num := func(k string, v int64) { c.W.BulkString(k); c.W.Int(v) }
		str("name", j.ID)
		str("operation", "EXPORT")
		str("slot_ranges", joinRanges(j.Ranges))
		str("source_node", j.SourceNode)
		str("target_node", j.TargetNode)
		str("target_group", j.TargetGroup)
		num("create_time", j.Created/1e6)
		num("start_time", j.Created/1e6)
		num("last_update_time", j.Updated/1e6)
		num("end_time", j.Ended/1e6)
		str("state", j.State)
		str("message", j.Message)
		str("slots_moved", joinRanges(j.Done))
		str("slots_pending", joinRanges(j.Pending))
		num("keys_moved", int64(j.Keys))
		num("bytes_moved", int64(j.Bytes))
		str("error", errText)
	}
}

// joinRanges writes ranges as Valkey's slot_ranges: "start-end" joined by
// spaces.
func joinRanges(rs [][2]int) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = strconv.Itoa(r[0]) + "-" + strconv.Itoa(r[1])
	}
	return strings.Join(parts, " ")
}
