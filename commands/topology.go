package commands

import (
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/slot"
)

// topoNode is one node as topology replies (CLUSTER NODES/SLOTS/SHARDS,
// ROLE, INFO replication) describe it. On a single node there is one, the
// master of every slot; in a replicated cluster the leader is the master
// of every slot and the other members are its replicas.
type topoNode struct {
	id     string // 40 hex characters
	host   string
	port   int
	master bool
	self   bool
	// known: this node knows the member's state (a follower learns its
	// siblings' from the leader; see cluster.Node.Peers). online: heard
	// from within the heartbeat timeout (always on a single node); contact
	// is how long ago (-1: never), match the highest log index it is known
	// to hold.
	known   bool
	online  bool
	contact time.Duration
	match   uint64
}

// topology lists the nodes, the master first; ok is false when a
// replicated cluster has no leader (cluster_state:fail).
func (c *Ctx) topology() (nodes []topoNode, ok bool) {
	n := c.Env.Cluster
	if n == nil {
		host, port := c.announceAddr()
		return []topoNode{{id: c.Env.NodeID, host: host, port: port, master: true, self: true, known: true, online: true}}, true
	}
	members, err := n.Peers()
	if err != nil {
		return nil, false
	}
	for _, m := range members {
		host, portStr, _ := net.SplitHostPort(m.ClientAddr)
		port, _ := strconv.Atoi(portStr)
		if m.Self && c.Env.Options.AdvertiseAddr != "" {
			host, port = c.announceAddr()
		}
		t := topoNode{id: cluster.MemberNodeID(m.ID, m.RaftAddr), host: host, port: port, master: m.Leader, self: m.Self,
			known: m.Known, online: m.Online, contact: m.LastContact, match: m.MatchIndex}
		if t.master {
			nodes = append([]topoNode{t}, nodes...)
			ok = true
		} else {
			nodes = append(nodes, t)
		}
	}
	return nodes, ok
}

// myID is CLUSTER MYID: this node's 40-hex-character id.
func (c *Ctx) myID() string {
	return c.Env.NodeID
}

func runClusterInfo(c *Ctx, _ [][]byte) {
	nodes, ok := c.topology()
	state, assigned := "ok", "16384"
	if !ok {
		state, assigned = "fail", "0"
	}
	c.W.Verbatim("cluster_state:" + state + "\r\n" +
		"cluster_slots_assigned:" + assigned + "\r\n" +
		"cluster_slots_ok:" + assigned + "\r\n" +
		"cluster_slots_pfail:0\r\n" +
		"cluster_slots_fail:0\r\n" +
		"cluster_known_nodes:" + strconv.Itoa(len(nodes)) + "\r\n" +
		"cluster_size:1\r\n" +
		"cluster_current_epoch:1\r\n" +
		"cluster_my_epoch:1\r\n" +
		"cluster_stats_messages_sent:0\r\n" +
		"cluster_stats_messages_received:0\r\n" +
		"total_cluster_links_buffer_limit_exceeded:0\r\n")
}

// runClusterNodes writes a line per node:
// <id> <ip:port@cport> <flags> <master> <ping-sent> <pong-recv> <epoch> <link> <slots>.
func runClusterNodes(c *Ctx, _ [][]byte) {
	nodes, ok := c.topology()
	var b strings.Builder
	masterID := "-"
	if ok {
		masterID = nodes[0].id
	}
	now := time.Now()
	for _, n := range nodes {
		flags := "slave"
		if n.master {
			flags = "master"
		}
		if n.self {
			flags = "myself," + flags
		}
		// A member not heard from is suspected (fail?), and failed once
		// it stays silent ten heartbeat timeouts or was never heard. A
		// member whose state this node does not know (a follower with no
		// fresh word from the leader) is not linked, and not failed.
		link, pong := "connected", "0"
		if n.contact >= 0 && !n.self {
			pong = strconv.FormatInt(now.Add(-n.contact).UnixMilli(), 10)
		}
		switch {
		case !n.known:
			link = "disconnected"
		case !n.online:
			link = "disconnected"
			if n.contact < 0 || n.contact > 10*c.heartbeatTimeout() {
				flags += ",fail"
			} else {
				flags += ",fail?"
			}
		}
		b.WriteString(n.id + " " + n.host + ":" + strconv.Itoa(n.port) + "@" + strconv.Itoa(busPort(n.port)) + " " + flags + " ")
		if n.master {
			b.WriteString("- 0 " + pong + " 1 " + link + " 0-" + strconv.Itoa(slot.Count-1) + "\n")
		} else {
			b.WriteString(masterID + " 0 " + pong + " 1 " + link + "\n")
		}
	}
	c.W.Verbatim(b.String())
}

// runClusterSlots is [[0, 16383, master, replicas…]], each node [host,
// port, id, {}] (the empty map is Redis 7's networking metadata); empty
// when no leader is known. Failed replicas are left out, as Redis leaves
// them out.
func runClusterSlots(c *Ctx, _ [][]byte) {
	all, ok := c.topology()
	w := c.W
	if !ok {
		w.Array(0)
		return
	}
	nodes := all[:1]
	for _, n := range all[1:] {
		if !n.known || n.online {
			nodes = append(nodes, n)
		}
	}
	w.Array(1)
	w.Array(2 + len(nodes))
	w.Int(0)
	w.Int(slot.Count - 1)
	for _, n := range nodes {
		w.Array(4)
		w.BulkString(n.host)
		w.Int(int64(n.port))
		w.BulkString(n.id)
		w.Map(0)
	}
}

// runClusterShards is Redis 7's CLUSTER SHARDS: one shard holding every
// slot, its nodes the leader (master) and its replicas.
func runClusterShards(c *Ctx, _ [][]byte) {
	nodes, ok := c.topology()
	w := c.W
	w.Array(1)
	w.Map(2)
	w.BulkString("slots")
	if ok {
		w.Array(2)
		w.Int(0)
		w.Int(slot.Count - 1)
	} else {
		w.Array(0)
	}
	w.BulkString("nodes")
	w.Array(len(nodes))
	for _, n := range nodes {
		role := "replica"
		if n.master {
			role = "master"
		}
		w.Map(7)
		w.BulkString("id")
		w.BulkString(n.id)
		w.BulkString("port")
		w.Int(int64(n.port))
		w.BulkString("ip")
		w.BulkString(n.host)
		w.BulkString("endpoint")
		w.BulkString(n.host)
		w.BulkString("role")
		w.BulkString(role)
		w.BulkString("replication-offset")
		w.Int(int64(n.match))
		w.BulkString("health")
		switch {
		case !n.known:
			w.BulkString("unknown")
		case n.online:
			w.BulkString("online")
		default:
			w.BulkString("failed")
		}
	}
}

// role is this node's role as Redis names it: master, or slave.
func (c *Ctx) role() string {
	if n := c.Env.Cluster; n != nil && !n.Serving() {
		return "slave"
	}
	return "master"
}

// runRole is ROLE: ["master", offset, [[ip, port, offset] …]] on the
// leader (or a single node), ["slave", ip, port, state, offset] elsewhere.
func runRole(c *Ctx, _ [][]byte) {
	nodes, ok := c.topology()
	offset := int64(0)
	if n := c.Env.Cluster; n != nil {
		offset = int64(n.Status().AppliedIdx)
	}
	if c.role() == "master" {
		// Only replicas heard from, each with the log index it holds, as
		// Redis lists its connected replicas and their offsets.
		var live []topoNode
		for _, n := range nodes[1:] {
			if n.online {
				live = append(live, n)
			}
		}
		c.W.Array(3)
		c.W.BulkString("master")
		c.W.Int(offset)
		c.W.Array(len(live))
		for _, n := range live {
			c.W.Array(3)
			c.W.BulkString(n.host)
			c.W.BulkString(strconv.Itoa(n.port))
			c.W.BulkString(strconv.FormatUint(n.match, 10))
		}
		return
	}
	host, port, state := "", int64(0), "connect"
	if ok {
		host, port, state = nodes[0].host, int64(nodes[0].port), "connected"
	}
	c.W.Array(5)
	c.W.BulkString("slave")
	c.W.BulkString(host)
	c.W.Int(port)
	c.W.BulkString(state)
	c.W.Int(offset)
}

// replicationInfo is INFO's replication section.
func (c *Ctx) replicationInfo() [][2]string {
	e := c.Env
	nodes, ok := c.topology()
	offset := "0"
	if e.Cluster != nil {
		offset = strconv.FormatUint(e.Cluster.Status().AppliedIdx, 10)
	}
	tail := [][2]string{{"master_failover_state", "no-failover"},
		{"master_replid", e.RunID}, {"master_replid2", strings.Repeat("0", 40)},
		{"master_repl_offset", offset}, {"second_repl_offset", "-1"}, {"repl_backlog_active", "0"},
		{"repl_backlog_size", "0"}, {"repl_backlog_first_byte_offset", "0"}, {"repl_backlog_histlen", "0"}}
	if c.role() == "master" {
		// Connected replicas only, as Redis lists them: connected_slaves
		// counts the slaveN lines.
		var slaves [][2]string
		for _, n := range nodes[1:] {
			if !n.online {
				continue
			}
			lag := "-1"
			if n.contact >= 0 {
				lag = strconv.FormatInt(int64(n.contact/time.Second), 10)
			}
			slaves = append(slaves, [2]string{"slave" + strconv.Itoa(len(slaves)), "ip=" + n.host + ",port=" + strconv.Itoa(n.port) +
				",state=online,offset=" + strconv.FormatUint(n.match, 10) + ",lag=" + lag})
		}
		out := append([][2]string{{"role", "master"}, {"connected_slaves", strconv.Itoa(len(slaves))}}, slaves...)
		return append(out, tail...)
	}
	host, port, link, io := "", "0", "down", "-1"
	if ok {
		host, port = nodes[0].host, strconv.Itoa(nodes[0].port)
		if nodes[0].online {
			link = "up"
		}
		if nodes[0].contact >= 0 {
			io = strconv.FormatInt(int64(nodes[0].contact/time.Second), 10)
		}
	}
	out := [][2]string{{"role", "slave"}, {"master_host", host}, {"master_port", port}, {"master_link_status", link},
		{"master_last_io_seconds_ago", io}, {"master_sync_in_progress", "0"}, {"slave_read_repl_offset", offset},
		{"slave_repl_offset", offset}, {"slave_priority", "100"}, {"slave_read_only", "1"}, {"replica_announced", "1"},
		{"connected_slaves", "0"}}
	return append(out, tail...)
}

// heartbeatTimeout is the cluster's failure-detection time (a second on a
// single node, where nothing fails).
func (c *Ctx) heartbeatTimeout() time.Duration {
	if n := c.Env.Cluster; n != nil {
		return n.HeartbeatTimeout()
	}
	return time.Second
}
