package commands

import (
	"net"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/slot"
)

// sluice answers as a Redis Cluster of one node that owns all 16384 slots,
// so cluster-aware clients (go-redis ClusterClient, ioredis Cluster,
// redis-py RedisCluster, Jedis, Lettuce, redis-cli -c) connect unchanged and
// route every key here. Since one node owns every slot, multi-key commands
// never fail with CROSSSLOT here; a sharded deployment would require keys
// checked together to share a slot ({hash tags}).

func clusterCommands() []*Command {
	sub := func(name string, arity int, summary string, run func(*Ctx, [][]byte), args ...Arg) *Command {
		return &Command{Spec: cmdspec.Spec{Name: name, Arity: arity, Flags: []string{"loading", "stale"}, Group: "cluster",
			Since: "3.0.0", Summary: summary, Complexity: "O(1)", Args: args}, Run: run}
	}
	shards := sub("shards", 2, "Returns the mapping of cluster slots to shards.", runClusterShards)
	shards.Since = "7.0.0"
	myShardID := sub("myshardid", 2, "Returns the shard ID of a node.", func(c *Ctx, _ [][]byte) {
		c.W.BulkString(c.shardID())
	})
	myShardID.Since = "7.2.0"
	ok := func(c *Ctx, _ [][]byte) { c.W.OK() }
	return []*Command{
		{Spec: cmdspec.Spec{Name: "cluster", Arity: -2, Group: "cluster", Since: "3.0.0",
			Summary: "A container for Redis Cluster commands.", Complexity: "Depends on subcommand."}, Subs: append([]*Command{
			sub("info", 2, "Returns information about the state of a node.", runClusterInfo),
			sub("myid", 2, "Returns the ID of a node.", func(c *Ctx, _ [][]byte) { c.W.BulkString(c.myID()) }),
			myShardID,
			sub("nodes", 2, "Returns the cluster configuration for a node.", runClusterNodes),
			sub("slots", 2, "Returns the mapping of cluster slots to nodes.", runClusterSlots),
			shards,
			sub("keyslot", 3, "Returns the hash slot for a key.", func(c *Ctx, args [][]byte) {
				c.W.Int(int64(slot.Of(args[2])))
			}, Arg{Name: "key", Type: "string"}),
			sub("countkeysinslot", 3, "Returns the number of keys in a hash slot.", runClusterCountKeys,
				Arg{Name: "slot", Type: "integer"}),
			sub("getkeysinslot", 4, "Returns the key names in a hash slot.", runClusterGetKeys,
				Arg{Name: "slot", Type: "integer"}, Arg{Name: "count", Type: "integer"}),
			sub("help", 2, "Returns helpful text about the different subcommands.", runClusterHelp),
		}, migrationCommands()...)},
		{Spec: cmdspec.Spec{Name: "readonly", Arity: 1, Flags: []string{"loading", "stale", "fast"}, Group: "cluster", Since: "3.0.0",
			Summary:    "Enables read-only queries for a connection to a Redis Cluster replica node (accepted).",
			Complexity: "O(1)"}, Run: func(c *Ctx, _ [][]byte) { c.Conn.setFlag(FlagReadOnly, true); c.W.OK() }},
		{Spec: cmdspec.Spec{Name: "readwrite", Arity: 1, Flags: []string{"loading", "stale", "fast"}, Group: "cluster", Since: "3.0.0",
			Summary:    "Enables read-write queries for a connection to a Redis Cluster replica node (accepted).",
			Complexity: "O(1)"}, Run: func(c *Ctx, _ [][]byte) { c.Conn.setFlag(FlagReadOnly, false); c.W.OK() }},
		{Spec: cmdspec.Spec{Name: "asking", Arity: 1, Flags: []string{"fast"}, Group: "cluster", Since: "3.0.0",
			Summary:    "Signals that a cluster client is following an -ASK redirect (sluice never sends one).",
			Complexity: "O(1)"}, Run: ok},
	}
}

// announceAddr is the host and port topology replies name for this node:
// --advertise-addr when set; else the listen address; and when that is a
// wildcard (0.0.0.0, ::), the local address this client reached the server
// on, which is by construction an address the client can reach.
func (c *Ctx) announceAddr() (string, int) {
	addr := c.Env.Options.AdvertiseAddr
	if addr == "" {
		addr = c.Env.Options.Addr
	}
	host, portStr, err := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	if err != nil {
		host = ""
	}
	if ip := net.ParseIP(host); c.Env.Options.AdvertiseAddr == "" && (host == "" || (ip != nil && ip.IsUnspecified())) {
		host = "127.0.0.1"
		if h, _, err := net.SplitHostPort(c.Conn.LocalAddr); err == nil {
			host = h
		}
	}
	return host, port
}

// busPort is the cluster bus port Redis would use (port+10000), or 0 when
// that does not fit: sluice runs no bus, clients only parse the number.
func busPort(port int) int {
	if port+10000 > 65535 {
		return 0
	}
	return port + 10000
}

// parseSlot reads a slot argument: an integer (else the integer error) in
// 0..16383 (else ok is false, for the caller's own error).
func (c *Ctx) parseSlot(arg []byte) (i int, isInt, ok bool) {
	n, isInt := parseInt(arg)
	if !isInt {
		return 0, false, false
	}
	return int(n), true, n >= 0 && n < slot.Count
}

func runClusterCountKeys(c *Ctx, args [][]byte) {
	i, isInt, ok := c.parseSlot(args[2])
	switch {
	case !isInt:
		c.W.Error(errNotInteger)
	case !ok:
		c.W.Error("ERR Invalid slot")
	default:
		c.W.Int(int64(c.Env.Machine.Keys().CountInSlotWhere(i, c.readInstant(), machine.UserKey)))
	}
}

func runClusterGetKeys(c *Ctx, args [][]byte) {
	i, isInt, ok := c.parseSlot(args[2])
	max, isInt2 := parseInt(args[3])
	switch {
	case !isInt || !isInt2:
		c.W.Error(errNotInteger)
		return
	case !ok || max < 0:
		c.W.Error("ERR Invalid slot or number of keys")
		return
	}
	var keys [][]byte
	s, now := c.Env.Machine.Keys().Read(i), c.readInstant()
	s.Keys(now, func(key []byte, e keyspace.Entry) bool {
		if int64(len(keys)) >= max {
			return false
		}
		if machine.Internal(e.Kind()) {
			return true
		}
		keys = append(keys, append([]byte(nil), key...))
		return true
	})
	s.Unlock()
	c.W.Array(len(keys))
	for _, k := range keys {
		c.W.Bulk(k)
	}
}

func runClusterHelp(c *Ctx, _ [][]byte) {
	c.W.BulkStrings(strings.Split(`CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:
COUNTKEYSINSLOT <slot>
    Return the number of keys in <slot>.
GETKEYSINSLOT <slot> <count>
    Return key names stored by current node in a slot.
INFO
    Return information about the cluster.
KEYSLOT <key>
    Return the hash slot for <key>.
MYID
    Return the node id.
MYSHARDID
    Return the node's shard id.
NODES
    Return cluster configuration seen by node. Output format:
    <id> <ip:port@bus-port[,hostname]> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...
SLOTS
    Return information about slots range mappings. Each range is made of:
    start, end, master and replicas IP addresses, ports and ids
SHARDS
    Return information about slot range mappings and the nodes associated with them.
HELP
    Print this help.`, "\n"))
}

// shardID is CLUSTER MYSHARDID: every member of a replicated cluster is in
// its one shard, so they all answer alike; a sharded cluster's groups are
// a shard each.
func (c *Ctx) shardID() string {
	if r := c.Env.Shards; r != nil {
		return cluster.ShardID("group:" + r.Map().Groups[r.Self()].ID)
	}
	if c.Env.Cluster != nil {
		return cluster.ShardID("replicated")
	}
	return cluster.ShardID(c.Env.NodeID)
}
