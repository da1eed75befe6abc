package commands

import (
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/cmdspec"
)

// replicationCommands are ROLE and the RAFT admin command.
func replicationCommands() []*Command {
	sub := func(name string, arity int, summary string, run func(*Ctx, [][]byte), args ...Arg) *Command {
		return &Command{Spec: cmdspec.Spec{Name: name, Arity: arity, Flags: []string{"admin", "noscript", "loading", "stale"}, Group: "server",
			Since: "1.0.0", Summary: summary, Complexity: "O(N) in the members", Args: args}, Run: run}
	}
	return []*Command{
		{Spec: cmdspec.Spec{Name: "role", Arity: 1, Flags: []string{"noscript", "loading", "stale", "fast"}, Group: "server", Since: "2.8.12",
			Summary: "Returns the replication role: master (the leader, or a single node) or slave.", Complexity: "O(1)"}, Run: runRole},
		{Spec: cmdspec.Spec{Name: "raft", Arity: -2, Group: "server", Since: "1.0.0",
			Summary: "Replication admin: members, leader, term and indexes; add and remove voters; transfer leadership; snapshot.", Complexity: "Depends on subcommand."}, Waits: true, Subs: []*Command{
			sub("info", 2, "Returns this node's Raft state, term, indexes and every member with its role.", runRaftInfo),
			sub("add", -4, "Adds a voting member: RAFT ADD <id> <client-addr> [<raft-addr>] (on the leader).", runRaftAdd,
				Arg{Name: "id", Type: "string"}, Arg{Name: "client-addr", Type: "string"}, Arg{Name: "raft-addr", Type: "string", Optional: true}),
			sub("remove", 3, "Removes a member: RAFT REMOVE <id> (on the leader).", runRaftRemove, Arg{Name: "id", Type: "string"}),
			sub("transfer", -2, "Hands leadership to a member, or to the most up-to-date one: RAFT TRANSFER [<id>] (on the leader).", runRaftTransfer,
				Arg{Name: "id", Type: "string", Optional: true}),
			sub("snapshot", 2, "Takes a Raft snapshot now.", runRaftSnapshot),
		}},
	}
}

const errNotReplicated = "ERR this node is not replicated (start it with --peers)"

// runRaftInfo is a map: state, term, indexes, leader, and members (each
// "id client-addr raft-addr role").
func runRaftInfo(c *Ctx, _ [][]byte) {
	n := c.Env.Cluster
	if n == nil {
		c.W.Error(errNotReplicated)
		return
	}
	st := n.Status()
	members, err := n.Peers()
	if err != nil {
		c.W.Error(errorReply(err))
		return
	}
	leader, _, _ := n.Leader()
	c.W.Map(10)
	for _, kv := range [][2]string{{"node", n.Self()}, {"state", strings.ToLower(st.State)}, {"leader", leader}} {
		c.W.BulkString(kv[0])
		c.W.BulkString(kv[1])
	}
	for _, kv := range []struct {
		k string
		v int64
	}{{"term", int64(st.Term)}, {"last_index", int64(st.LastIndex)}, {"commit_index", int64(st.CommitIndex)},
		{"applied_index", int64(st.AppliedIdx)}, {"leader_changes", st.LeaderChanges}} {
		c.W.BulkString(kv.k)
		c.W.Int(kv.v)
	}
	c.W.BulkString("batches")
	sizes := n.BatchSizes()
	c.W.Array(len(sizes))
	for i, k := range sizes {
		c.W.BulkString(strconv.Itoa(1<<i) + "-" + strconv.Itoa(1<<(i+1)-1) + " commands: " + strconv.FormatInt(k, 10))
	}
	c.W.BulkString("members")
	c.W.Array(len(members))
	for _, m := range members {
		role := "follower"
		switch {
		case m.Leader:
			role = "leader"
		case !m.Voter:
			role = "nonvoter"
		}
		contact := "-1"
		if m.LastContact >= 0 {
			contact = strconv.FormatInt(m.LastContact.Milliseconds(), 10)
		}
		c.W.BulkString(m.ID + " " + m.ClientAddr + " " + m.RaftAddr + " " + role + " " + m.Health() +
			" last_contact_ms=" + contact + " match_index=" + strconv.FormatUint(m.MatchIndex, 10))
	}
}

func runRaftAdd(c *Ctx, args [][]byte) {
	n := c.Env.Cluster
	if n == nil {
		c.W.Error(errNotReplicated)
		return
	}
	if len(args) > 5 {
		c.W.Error(errSyntax)
		return
	}
	id, clientAddr := string(args[2]), string(args[3])
	raftAddr, err := raftAddrFor(clientAddr)
	if len(args) == 5 {
		raftAddr, err = string(args[4]), nil
	}
	if err != nil {
		c.W.Error("ERR " + err.Error())
		return
	}
	c.replyAdmin(n.AddVoter(id, clientAddr, raftAddr))
}

func runRaftRemove(c *Ctx, args [][]byte) {
	if c.Env.Cluster == nil {
		c.W.Error(errNotReplicated)
		return
	}
	c.replyAdmin(c.Env.Cluster.RemoveMember(string(args[2])))
}

func runRaftTransfer(c *Ctx, args [][]byte) {
	if c.Env.Cluster == nil {
		c.W.Error(errNotReplicated)
		return
	}
	if len(args) > 3 {
		c.W.Error(errSyntax)
		return
	}
	id := ""
	if len(args) == 3 {
		id = string(args[2])
	}
	c.replyAdmin(c.Env.Cluster.TransferLeadership(id))
}

func runRaftSnapshot(c *Ctx, _ [][]byte) {
	if c.Env.Cluster == nil {
		c.W.Error(errNotReplicated)
		return
	}
	c.replyAdmin(c.Env.Cluster.Snapshot())
}

func (c *Ctx) replyAdmin(err error) {
	if err != nil {
		c.W.Error("ERR " + err.Error())
		return
	}
	c.W.OK()
}

// raftAddrFor is the Raft address of a member given only its client
// address: the client port plus 10000, as Redis' cluster bus.
func raftAddrFor(clientAddr string) (string, error) {
	i := strings.LastIndexByte(clientAddr, ':')
	if i < 0 {
		return "", strconv.ErrSyntax
	}
	p, err := strconv.Atoi(clientAddr[i+1:])
	if err != nil || p < 1 || p+10000 > 65535 {
		return "", strconv.ErrRange
	}
	return clientAddr[:i+1] + strconv.Itoa(p+10000), nil
}
