package commands

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/shardmap"
	"github.com/sluice-rl/sluice/slot"
)

// infoSection is one INFO section; inDefault says whether INFO with no
// argument (or "default") includes it, as in Redis 7.2.
type infoSection struct {
	name      string
	inDefault bool
}

// title is the section's header as Redis prints it ("Server", "CPU").
func (s infoSection) title() string {
	if s.name == "cpu" {
		return "CPU"
	}
	return strings.ToUpper(s.name[:1]) + s.name[1:]
}

// infoSections are INFO's sections in the order Redis prints them.
var infoSections = []infoSection{
	{"server", true}, {"clients", true}, {"memory", true}, {"persistence", true}, {"stats", true},
	{"replication", true}, {"cpu", true}, {"modules", true}, {"errorstats", true}, {"cluster", true},
	{"keyspace", true}, {"commandstats", false}, {"latencystats", false},
}

// runInfo is INFO [section …] in Redis' text format: "# Section" headers,
// "field:value" lines, CRLF line ends, a blank line between sections.
// "all" is every section, "everything" too, "default" (or no argument) the
// default ones; unknown section names are ignored, as Redis ignores them.
func runInfo(c *Ctx, args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[lower(a)] = true
	}
	all := want["all"] || want["everything"]
	def := len(args) == 1 || want["default"]
	var b strings.Builder
	for _, s := range infoSections {
		if !all && !want[s.name] && !(def && s.inDefault) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# ")
		b.WriteString(s.title())
		b.WriteString("\r\n")
		for _, f := range c.infoFields(s.name) {
			b.WriteString(f[0])
			b.WriteByte(':')
			b.WriteString(f[1])
			b.WriteString("\r\n")
		}
	}
	c.W.Verbatim(b.String())
}

func (c *Ctx) infoFields(name string) [][2]string {
	e := c.Env
	now := c.Now()
	switch name {
	case "server":
		port := ""
		if i := strings.LastIndexByte(e.Options.Addr, ':'); i >= 0 {
			port = e.Options.Addr[i+1:]
		}
		up := (now - e.Started) / 1e9
		return [][2]string{
			{"redis_version", RedisVersion},
			{"redis_git_sha1", "00000000"},
			{"redis_git_dirty", "0"},
			{"redis_build_id", "0"},
			{"redis_mode", e.mode()},
			{"sluice_version", e.Options.Version},
			{"os", runtime.GOOS + " " + runtime.GOARCH},
			{"arch_bits", strconv.Itoa(strconv.IntSize)},
			{"monotonic_clock", "POSIX clock_gettime"},
			{"multiplexing_api", "go"},
			{"go_version", runtime.Version()},
			{"process_id", strconv.Itoa(os.Getpid())},
			{"process_supervised", "no"},
			{"run_id", e.RunID},
			{"tcp_port", port},
			{"server_time_usec", itoa(now / 1e3)},
			{"uptime_in_seconds", itoa(up)},
			{"uptime_in_days", itoa(up / 86400)},
			{"hz", "10"},
			{"configured_hz", "10"},
			{"executable", executable()},
			{"config_file", ""},
			{"io_threads_active", "0"},
		}
	case "clients":
		return [][2]string{
			{"connected_clients", itoa(e.Stats.ConnectedClients.Load())},
			{"cluster_connections", "0"},
			{"maxclients", itoa(e.Tunables.MaxClients.Load())},
			{"client_recent_max_input_buffer", "0"},
			{"client_recent_max_output_buffer", "0"},
			{"blocked_clients", "0"},
			{"tracking_clients", "0"},
			{"clients_in_timeout_table", "0"},
			{"total_blocking_keys", "0"},
			{"total_blocking_keys_on_nokey", "0"},
		}
	case "memory":
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		st := e.Machine.Keys().Stats()
		// used_memory is what maxmemory is compared with: the Go heap's
		// live objects (as the last collection found them) plus the
		// keyspace's off-heap blocks. used_memory_rss is the resident set;
		// where it cannot be read, the runtime's and the off-heap memory's
		// own totals stand in for it.
		used, heap, offHeap := e.MemoryUse()
		rss, ok := processRSS()
		if !ok {
			rss = m.Sys + uint64(st.OffHeap.Held)
		}
		limit := e.Tunables.MaxMemory.Load()
		return [][2]string{
			{"used_memory", itoa(used)},
			{"used_memory_human", humanBytes(uint64(used))},
			{"used_memory_rss", strconv.FormatUint(rss, 10)},
			{"used_memory_rss_human", humanBytes(rss)},
			{"used_memory_heap", itoa(heap)},
			{"used_memory_heap_allocated", strconv.FormatUint(m.HeapAlloc, 10)},
			{"used_memory_offheap", itoa(offHeap)},
			{"used_memory_offheap_held", strconv.FormatInt(st.OffHeap.Held, 10)},
			{"used_memory_offheap_mapped", strconv.FormatInt(st.OffHeap.Mapped, 10)},
			{"used_memory_keyspace", strconv.Itoa(st.Bytes)},
			{"used_memory_clients", itoa(e.Memory.Clients.Load())},
			{"maxmemory", itoa(limit)},
			// The Go runtime's memory limit in force (the server keeps it
			// at what maxmemory leaves the heap; max int64: none).
			{"go_memory_limit", itoa(debug.SetMemoryLimit(-1))},
			{"maxmemory_human", humanBytes(uint64(limit))},
			{"maxmemory_policy", "noeviction"},
			{"maxmemory_clients", itoa(e.MaxMemoryClients())},
			{"oom_rejected_commands", itoa(e.Memory.RejectedOOM.Load())},
		}
	case "persistence":
		return c.persistenceInfo()
	case "stats":
		rc := e.Machine.Reservations()
		return [][2]string{
			{"total_connections_received", itoa(e.Stats.ConnectionsReceived.Load())},
			{"total_commands_processed", itoa(e.Table.Calls())},
			{"total_net_input_bytes", itoa(e.Stats.NetInputBytes.Load())},
			{"total_net_output_bytes", itoa(e.Stats.NetOutputBytes.Load())},
			{"rejected_connections", itoa(e.Stats.ConnectionsRejected.Load())},
			{"expired_keys", itoa(e.Stats.ExpiredKeys.Load())},
			{"evicted_keys", "0"},
			{"evicted_clients", itoa(e.Memory.EvictedClients.Load())},
			{"limited_requests", itoa(e.Table.limitedTotal())},
			{"reservations_held", itoa(rc.Held)},
			{"reservations_reserved", itoa(rc.Reserved)},
			{"reservations_settled", itoa(rc.Settled)},
			{"reservations_cancelled", itoa(rc.Cancelled)},
			{"reservations_expired", itoa(rc.Expired)},
		}
	case "replication":
		return c.replicationInfo()
	case "cpu":
		return cpuFields()
	case "cluster":
		// The log's time (the instant the state machine last applied at,
		// ms): a sharded cluster's members read each group's lag by it.
		// The slots its group's log says it owns, at their epoch: the
		// other groups' members route by them.
		// The log's apply level and this binary's (machine.Level): a
		// group upgraded member by member takes the new behaviour once
		// its leader raised the first to the second.
		out := [][2]string{{"cluster_enabled", "1"}, {"sluice_log_time_ms", strconv.FormatInt(e.Machine.Applied()/1e6, 10)},
			{"sluice_apply_level", strconv.FormatUint(uint64(e.Machine.AppliedLevel()), 10)},
			{"sluice_apply_level_supported", strconv.Itoa(machine.Level)}}
		if o := e.Machine.Owned(); o != nil {
			out = append(out, [2]string{"sluice_slots_epoch", strconv.FormatUint(o.Epoch, 10)},
				[2]string{"sluice_slots", slot.FormatRanges(o.SlotRanges())})
			// This group's migrations as CLUSTER NODES shows them on
			// every member (shardmap.JobView).
			out = append(out, [2]string{"sluice_migrating", shardmap.FormatJobViews(ownJobViews(o, time.Now()))})
		}
		if r := e.Shards; r != nil {
			// Slots two groups claim at one epoch: no group decides for
			// them (shardmap.Conflict): "<ranges>=<group>,<group>@<epoch>".
			conflicts := r.Conflicts()
			said := make([]string, len(conflicts))
			m := r.Map()
			for i, c := range conflicts {
				said[i] = shardmap.Range{From: c.From, To: c.To}.String() + "=" + m.Groups[c.A].ID + "," + m.Groups[c.B].ID +
					"@" + strconv.FormatUint(c.Epoch, 10)
			}
			out = append(out, [2]string{"sluice_slot_conflicts", strings.Join(said, ";")})
		}
		return out
	case "keyspace":
		n := machine.UserKeys(e.Machine.Keys().Stats())
		if n == 0 {
			return nil
		}
		// Every sluice key is a limiter that expires once back to its
		// resting state, so each counts as a key with an expiry.
		return [][2]string{{"db0", fmt.Sprintf("keys=%d,expires=%d,avg_ttl=0", n, n)}}
	case "commandstats":
		var out [][2]string
		add := func(cmd *Command) {
			if cmd.Calls() > 0 {
				out = append(out, [2]string{"cmdstat_" + cmd.FullName(), commandstat(cmd)})
			}
		}
		for _, cmd := range e.Table.Commands() {
			add(cmd)
			for _, s := range cmd.Subs {
				add(s)
			}
		}
		return out
	}
	return nil
}
