package commands

import (
	"net"
	"slices"
	"sort"
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

// migrationMarks are the Redis Cluster marks of the slots of running
// migrations out of group g ("[slot->-target master]") and into it
// ("[slot-<-source master]"), for the line of g's leader about itself:
// redis-cli --cluster check reports them as open slots while a migration
// runs.
func (c *Ctx) migrationMarks(shards []topoShard, g int, now time.Time) []string {
	r := c.Env.Shards
	if r == nil || g < 0 {
		return nil
	}
	master := func(group int) string {
		for _, sh := range shards {
			if sh.group == group && sh.ok {
				return sh.nodes[0].id
			}
		}
		return ""
	}
	m := r.Map()
	var marks []string
	add := func(rs [][2]int, arrow, node string) {
		for _, rg := range rs {
			for s := rg[0]; s <= rg[1]; s++ {
				marks = append(marks, "["+strconv.Itoa(s)+arrow+node+"]")
			}
		}
	}
	for src := range m.Groups {
		if m.Groups[src].Removed {
			continue
		}
		for _, v := range c.jobViews(src, now) {
			if v.Until != 0 {
				continue // ended
			}
			switch t, ok := r.GroupIndex(v.Target); {
			case src == g && ok:
				if id := master(t); id != "" {
					add(v.Ranges, "->-", id)
				}
			case src != g && ok && t == g:
				if id := master(src); id != "" {
					add(v.Ranges, "-<-", id)
				}
			}
		}
	}
	sort.Strings(marks)
	return marks
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
	if !ok && len(nodes) > 0 {
		// No leader: this member stands for the group, so the topology
		// replies still place its slots (its commands answer CLUSTERDOWN
		// until a leader is elected) on a member that is up — the one
		// answering. The first member of the list may be dead: a client
		// whose ready check went there (ioredis' connect) never became
		// ready.
		i := max(slices.IndexFunc(nodes, func(t topoNode) bool { return t.self }), 0)
		nodes[i].master = true
		nodes[0], nodes[i] = nodes[i], nodes[0]
	}
	return nodes, ok
}

// myID is CLUSTER MYID: this node's 40-hex-character id.
func (c *Ctx) myID() string {
	return c.Env.NodeID
}

// topoShard is one shard as the CLUSTER replies describe it: the slot
// ranges it owns and its nodes, the master first.
type topoShard struct {
	id     string // 40 hex characters
	group  int    // the router's index of the group (-1: not sharded)
	ranges [][2]int
	nodes  []topoNode
	// ok: a master is known.
	ok bool
}

// shards lists the shards: this node's group (with topology's nodes) and,
// on a member of a sharded cluster, every other group of the map, in the
// map's order, with its leader as master when one is known. Each group's
// ranges are its live ones, or with shown (CLUSTER NODES) those shown
// while migrations run (shownOwners).
func (c *Ctx) shards(shown bool) []topoShard {
	nodes, ok := c.topology()
	own := topoShard{id: c.shardID(), group: -1, ranges: [][2]int{{0, slot.Count - 1}}, nodes: nodes, ok: ok}
	r := c.Env.Shards
	if r == nil {
		return []topoShard{own}
	}
	m := r.Map()
	var owners *[slot.Count]int
	if shown {
		owners = c.shownOwners(time.Now())
	}
	out := make([]topoShard, 0, len(m.Groups))
	for g := range m.Groups {
		grp := &m.Groups[g]
		if grp.Removed {
			continue
		}
		var ranges [][2]int
		if shown {
			ranges = rangesOf(owners, g)
		} else {
			ranges = r.Ranges(g) // live: slot migrations move them
		}
		if g == r.Self() {
			own.group = g
			own.ranges = ranges
			out = append(out, own)
			continue
		}
		leader, known := r.Leader(g)
		sh := topoShard{id: cluster.ShardID("group:" + grp.ID), group: g, ranges: ranges, ok: known}
		// Without a leader known, a member stands for the group — the last
		// leader if it still answers, else one that answers, else the last
		// leader, else the map's first — so every group's slots are placed
		// from the first answer, on a member that is up where one is; a key
		// of its slots is MOVED there (RedirectKey), and that member answers
		// for its group. A member is online when it answered the latest
		// probe.
		up := r.Answered(g)
		stand := leader
		if !known {
			stand = standIn(grp.Members, r.LastLeader(g), up)
		}
		for _, p := range grp.Members {
			host, portStr, _ := net.SplitHostPort(p.ClientAddr)
			port, _ := strconv.Atoi(portStr)
			t := topoNode{id: cluster.MemberNodeID(p.ID, p.RaftAddr), host: host, port: port,
				master: p.ClientAddr == stand, known: up != nil, online: slices.Contains(up, p.ClientAddr), contact: -1}
			if t.master {
				sh.nodes = append([]topoNode{t}, sh.nodes...)
			} else {
				sh.nodes = append(sh.nodes, t)
			}
		}
		out = append(out, sh)
	}
	return out
}

// standIn is the client address of the member that stands for a group
// without a leader: its last leader if that one is up, else the first
// member up, else the last leader, else the first member.
func standIn(members []cluster.Peer, last string, up []string) string {
	has := func(addr string) bool {
		return slices.ContainsFunc(members, func(p cluster.Peer) bool { return p.ClientAddr == addr })
	}
	if last != "" && has(last) && slices.Contains(up, last) {
		return last
	}
	for _, p := range members {
		if slices.Contains(up, p.ClientAddr) {
			return p.ClientAddr
		}
	}
	if last != "" && has(last) {
		return last
	}
	if len(members) > 0 {
		return members[0].ClientAddr
	}
	return ""
}

// epoch is the cluster map's epoch (1 without a map).
func (c *Ctx) epoch() string {
	if r := c.Env.Shards; r != nil {
		return strconv.FormatUint(r.Epoch(), 10)
	}
	return "1"
}

// runClusterInfo is CLUSTER INFO. As Redis with cluster-require-full-coverage
// no, a sharded cluster's state is ok while its map's groups exist: a
// group without a leader fails only the commands for its slots
// (cluster_slots_fail counts them), right after a start too (a client
// that waits for ok before it routes anything, as ioredis does, is not
// held up by a group still electing). One group (no map) without a leader
// is fail.
func runClusterInfo(c *Ctx, _ [][]byte) {
	shards := c.shards(false)
	state, assigned, okSlots, known := "fail", 0, 0, 0
	if c.Env.Shards != nil {
		state = "ok"
	}
	conflicted := c.Env.Shards != nil && len(c.Env.Shards.Conflicts()) > 0
	for _, sh := range shards {
		known += len(sh.nodes)
		n := 0
		for _, r := range sh.ranges {
			n += r[1] - r[0] + 1
		}
		assigned += n
		if sh.ok {
			okSlots += n
			state = "ok"
		}
	}
	if conflicted {
		state = "fail" // two groups claim slots at one epoch: neither decides for them
	}
	c.W.Verbatim("cluster_state:" + state + "\r\n" +
		"cluster_slots_assigned:" + strconv.Itoa(assigned) + "\r\n" +
		"cluster_slots_ok:" + strconv.Itoa(okSlots) + "\r\n" +
		"cluster_slots_pfail:0\r\n" +
		"cluster_slots_fail:" + strconv.Itoa(assigned-okSlots) + "\r\n" +
		"cluster_known_nodes:" + strconv.Itoa(known) + "\r\n" +
		"cluster_size:" + strconv.Itoa(len(shards)) + "\r\n" +
		"cluster_current_epoch:" + c.epoch() + "\r\n" +
		"cluster_my_epoch:" + c.epoch() + "\r\n" +
		"cluster_stats_messages_sent:0\r\n" +
		"cluster_stats_messages_received:0\r\n" +
		"total_cluster_links_buffer_limit_exceeded:0\r\n")
}

// runClusterNodes writes a line per node:
// <id> <ip:port@cport> <flags> <master> <ping-sent> <pong-recv> <epoch> <link> <slots>.
func runClusterNodes(c *Ctx, _ [][]byte) {
	var b strings.Builder
	now := time.Now()
	epoch := c.epoch()
	shards := c.shards(true)
	for _, sh := range shards {
		masterID := "-"
		if len(sh.nodes) > 0 && sh.nodes[0].master {
			masterID = sh.nodes[0].id
		}
		var slots []string
		for _, r := range sh.ranges {
			slots = append(slots, strconv.Itoa(r[0])+"-"+strconv.Itoa(r[1]))
		}
		if len(sh.nodes) > 0 && sh.nodes[0].self {
			slots = append(slots, c.migrationMarks(shards, sh.group, now)...)
		}
		for _, n := range sh.nodes {
			flags := "slave"
			if n.master {
				flags = "master"
			}
			if n.self {
				flags = "myself," + flags
			}
			// A member not heard from is suspected (fail?), and failed once
			// it stays silent ten heartbeat timeouts or was never heard. A
			// member whose state this node does not know (a follower with
			// no fresh word from the leader, another group's member with no
			// leader known) is not linked, and not failed.
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
				b.WriteString("- 0 " + pong + " " + epoch + " " + link + " " + strings.Join(slots, " ") + "\n")
			} else {
				b.WriteString(masterID + " 0 " + pong + " " + epoch + " " + link + "\n")
			}
		}
	}
	c.W.Verbatim(b.String())
}

// runClusterSlots is [[from, to, master, replicas…] …] per range of every
// shard, each node [host, port, id, {}] (the empty map is Redis 7's
// networking metadata); a shard without a leader known is placed on the
// member that stands for it. Failed replicas are left out, as Redis
// leaves them out.
func runClusterSlots(c *Ctx, _ [][]byte) {
	w := c.W
	var entries int
	shards := c.shards(false)
	for _, sh := range shards {
		if len(sh.nodes) > 0 {
			entries += len(sh.ranges)
		}
	}
	w.Array(entries)
	for _, sh := range shards {
		if len(sh.nodes) == 0 {
			continue
		}
		nodes := sh.nodes[:1]
		for _, n := range sh.nodes[1:] {
			if !n.known || n.online {
				nodes = append(nodes, n)
			}
		}
		for _, r := range sh.ranges {
			w.Array(2 + len(nodes))
			w.Int(int64(r[0]))
			w.Int(int64(r[1]))
			for _, n := range nodes {
				w.Array(4)
				w.BulkString(n.host)
				w.Int(int64(n.port))
				w.BulkString(n.id)
				w.Map(0)
			}
		}
	}
}

// runClusterShards is Redis 7's CLUSTER SHARDS: each shard's slots (from,
// to pairs) and nodes, its master first.
func runClusterShards(c *Ctx, _ [][]byte) {
	w := c.W
	shards := c.shards(false)
	w.Array(len(shards))
	for _, sh := range shards {
		w.Map(2)
		w.BulkString("slots")
		if len(sh.nodes) > 0 {
			w.Array(2 * len(sh.ranges))
			for _, r := range sh.ranges {
				w.Int(int64(r[0]))
				w.Int(int64(r[1]))
			}
		} else {
			w.Array(0)
		}
		w.BulkString("nodes")
		w.Array(len(sh.nodes))
		for _, n := range sh.nodes {
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
