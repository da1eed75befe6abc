package server

import (
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/crossgroup"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/persist"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/slotmove"
)

// Metrics exposes the server's counters to Prometheus. It reads the same
// counters INFO reads, so the two never disagree, and builds histograms
// from the buckets the server keeps anyway (no Prometheus work per
// command). Rate-limit keys are never labels: the label values are command
// names (the command table), rule names (the rule files) and Raft states.
type Metrics struct {
	env   *commands.Env
	store *persist.Store // nil when replicated or not persisting
	d     map[string]*prometheus.Desc
}

// metricDescs are every series' name, help and labels.
var metricDescs = []struct {
	name, help string
	labels     []string
}{
	{"sluice_commands_total", "Commands run, by command.", []string{"command"}},
	{"sluice_limited_total", "Requests a limiter refused, by command.", []string{"command"}},
	{"sluice_decisions_total", "Limiter decisions, by command and outcome (allowed, limited).", []string{"command", "outcome"}},
	{"sluice_command_duration_seconds", "Time spent running each command (on a replicated node, until its entry is queued; see sluice_raft_commit_duration_seconds).", []string{"command"}},
	{"sluice_command_errors_total", "Commands that answered an error, by command.", []string{"command"}},
	{"sluice_rule_decisions_total", "RL.CHECK decisions by the rule the reply names, and outcome (on the node that applied them: a single node, or a replicated leader).", []string{"domain", "rule", "outcome"}},
	{"sluice_rule_shadow_refusals_total", "Requests a shadow-mode rule would have refused.", []string{"domain", "rule"}},
	{"sluice_rule_limit", "Each loaded rule's limit in force: requests_per_unit after the domain's RL.SCALE (an RL.OVERRIDE is per descriptor value, and not here).", []string{"domain", "rule"}},
	{"sluice_rule_window_seconds", "Each loaded rule's window (or GCRA period), seconds.", []string{"domain", "rule"}},
	{"sluice_apply_panics_total", "Applies that panicked and answered an internal error instead (a bug: the log line has its stack), by command.", []string{"command"}},
	{"sluice_throttled_top_refusals", "Refusals of the most-refused keys (THROTTLED.TOP) in the recent window, by rank 1-10 — the keys themselves are on the status page and THROTTLED.TOP, never labels.", []string{"rank"}},
	{"sluice_connected_clients", "Open client connections.", nil},
	{"sluice_connections_received_total", "Connections accepted.", nil},
	{"sluice_connections_rejected_total", "Connections refused at max clients.", nil},
	{"sluice_expired_keys_total", "Keys removed by the expiry sweep.", nil},
	{"sluice_keys", "Users' keys held (limiters' counters; not sluice's own records), expired ones not yet swept included.", nil},
	{"sluice_reservations_held", "Reservations (RL.RESERVE) held, expired ones not yet swept included.", nil},
	{"sluice_reservations_total", "Reservations since start, by how they ended: reserved, settled, cancelled, expired.", []string{"outcome"}},
	{"sluice_used_memory_bytes", "used_memory: the heap's live objects (at the last collection) and the keyspace's off-heap blocks; what maxmemory is compared with.", nil},
	{"sluice_maxmemory_bytes", "maxmemory (0: no limit): over it, commands that would store more answer -OOM.", nil},
	{"sluice_oom_rejected_commands_total", "Commands refused with -OOM over maxmemory.", nil},
	{"sluice_used_memory_clients_bytes", "Replies queued for clients and not yet sent, all clients together.", nil},
	{"sluice_maxmemory_clients_bytes", "maxmemory-clients: past it the client with the largest buffers is closed.", nil},
	{"sluice_evicted_clients_total", "Clients closed over maxmemory-clients.", nil},
	{"sluice_offheap_allocated_bytes", "Off-heap memory the keyspace's blocks take.", nil},
	{"sluice_offheap_held_bytes", "Off-heap memory held for the keyspace (may be resident).", nil},
	{"sluice_quota_store_commits_total", "Batches committed to the quota store.", nil},
	{"sluice_quota_store_syncs_total", "fsyncs of the quota store.", nil},
	{"sluice_quota_store_changes_total", "Changes (quotas, overrides, scales) written to the quota store.", nil},
	{"sluice_quota_store_failed", "1 while the quota store cannot take writes (full disk, I/O error).", nil},
	{"sluice_snapshot_timestamp_seconds", "When the last snapshot was taken (Unix seconds; 0: none).", nil},
	{"sluice_snapshot_duration_seconds", "How long writing the last snapshot took.", nil},
	{"sluice_snapshot_bytes", "Size of the last snapshot.", nil},
	{"sluice_snapshot_failed", "1 if the last snapshot attempt failed.", nil},
	{"sluice_snapshot_skipped_keys_total", "Keys snapshots left out because their state could not be encoded (a bug: the log names them).", nil},
	{"sluice_raft_state", "1 for this node's Raft state (Leader, Follower, Candidate, Shutdown).", []string{"state"}},
	{"sluice_raft_term", "Current Raft term.", nil},
	{"sluice_raft_leader_live", "1 while this node leads and serves, or follows a leader it heard from within the heartbeat timeout.", nil},
	{"sluice_cluster_map_epoch", "A sharded member's cluster map epoch: the highest any group's log claims its slots at.", nil},
	{"sluice_member_port_connections", "Connections the member port holds (--member-max-conns), and of them those pending: not yet through header, proof, TLS and first byte (at most 256).", []string{"state"}},
	{"sluice_member_port_refused_total", "Member port connections refused and closed, by reason: over_max_conns, over_max_pending, no_header, group_not_hosted, not_proven, tls_failed, silent, bad_version, accept_failed.", []string{"reason"}},
	{"sluice_cluster_conflicting_slots", "Slots two groups claim at one epoch, as this member has learned: no group decides for them (CLUSTERDOWN) until one is given them at a later epoch. Never above 0 in a healthy cluster.", nil},
	{"sluice_crossgroup_checks_total", "Checks this member coordinated across groups, by how they ended: admitted, refused, failed.", []string{"outcome"}},
	{"sluice_crossgroup_parts_total", "The parts those checks were split into (the groups each touched, summed).", nil},
	{"sluice_crossgroup_part_finishes_total", "How the parts of checks across groups ended: settled (the check admitted: left to expire, keeping the charge), cancelled (refunded), lost (the cancel never arrived: the charge stays).", []string{"outcome"}},
	{"sluice_slot_migration_chunks_total", "Chunks of slots this member moved to another group (as its group's leader).", nil},
	{"sluice_slot_migration_keys_total", "Counters those chunks carried.", nil},
	{"sluice_slot_migration_bytes_total", "Bytes of counter state those chunks carried.", nil},
	{"sluice_slot_migration_cutover_seconds", "How long each chunk's slots answered TRYAGAIN: from before its cut was logged to the redirect to the target group.", nil},
	{"sluice_slot_migrations_running", "Slot migrations this member's group is running (as source).", nil},
	{"sluice_slot_migration_pending_seconds", "How long the oldest chunk cut from this group and not yet confirmed imported has waited (log time; 0: none): its slots answer TRYAGAIN meanwhile.", nil},
	{"sluice_cluster_fenced_epoch", "The epoch this group's state machine fences by (0: not yet; a sharded member only).", nil},
	{"sluice_cluster_group_slots", "The slots each group of the cluster map owns.", []string{"group"}},
	{"sluice_cluster_group_leader_known", "1 when this member knows the group's leader (its own group: a live leader; another: one answered ROLE as master).", []string{"group"}},
	{"sluice_cluster_group_leader", "1 for each group's leader as this member knows it (its client address).", []string{"group", "leader"}},
	{"sluice_cluster_group_lag_seconds", "How far each group's log time is behind this member's wall clock (its own group's: as applied here; another's: when its leader last answered).", []string{"group"}},
	{"sluice_cluster_member_group", "1 for the group this member belongs to (join with sluice_raft_state for each group's roles).", []string{"group"}},
	{"sluice_raft_last_index", "Last log index.", nil},
	{"sluice_raft_commit_index", "Commit index.", nil},
	{"sluice_raft_applied_index", "Applied index.", nil},
	{"sluice_raft_leader_changes_total", "Leadership changes this node has seen.", nil},
	{"sluice_raft_peer_last_contact_seconds", "Seconds since this node last heard from a member (a leader hears from every follower; a follower knows the leader; -1: never).", []string{"peer"}},
	{"sluice_raft_peer_match_index", "The highest log index a member is known to hold (on the leader).", []string{"peer"}},
	{"sluice_raft_peer_online", "1 while a member was heard from within the heartbeat timeout, as this node knows it.", []string{"peer"}},
	{"sluice_raft_commit_duration_seconds", "Time from handing an entry to Raft to its apply on this (leader) node.", nil},
	{"sluice_raft_batch_commands", "Commands per log entry this node proposed.", nil},
}

// NewMetrics describes the metrics of one server; store is its quota
// store, nil when it has none.
func NewMetrics(env *commands.Env, store *persist.Store) *Metrics {
	m := &Metrics{env: env, store: store, d: map[string]*prometheus.Desc{}}
	for _, d := range metricDescs {
		m.d[d.name] = prometheus.NewDesc(d.name, d.help, d.labels, nil)
	}
	return m
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error { return reg.Register(m) }

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range metricDescs {
		ch <- m.d[d.name]
	}
}

// ruleLimits reports each loaded rule's limit in force and window: one
// series per rule (a name two rules of a domain share is reported once,
// the first's), never per descriptor value.
func (m *Metrics) ruleLimits(gauge func(name string, v float64, labels ...string)) {
	st := m.env.Machine.Rules()
	if st == nil || st.Set == nil {
		return
	}
	now := m.env.Clock.Now()
	for _, domain := range st.Set.Domains() {
		factor, _ := m.env.Machine.DomainScale(domain, now)
		seen := map[string]bool{}
		for _, r := range st.Set.Domain(domain).Rules {
			if r.Algorithm == policy.Unlimited || seen[r.ID()] {
				continue
			}
			seen[r.ID()] = true
			gauge("sluice_rule_limit", float64(machine.Scale(r.Limit, factor)), domain, r.ID())
			if r.Window > 0 {
				gauge("sluice_rule_window_seconds", float64(r.Window)/1e9, domain, r.ID())
			}
		}
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	counter := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(m.d[name], prometheus.CounterValue, v, labels...)
	}
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(m.d[name], prometheus.GaugeValue, v, labels...)
	}
	var cmds []*commands.Command
	for _, c := range m.env.Table.Commands() {
		cmds = append(cmds, c)
		cmds = append(cmds, c.Subs...)
	}
	for _, c := range cmds {
		n := c.Calls()
		if n == 0 {
			continue
		}
		name := c.FullName()
		counter("sluice_commands_total", float64(n), name)
		if l := c.Limited(); l > 0 {
			counter("sluice_limited_total", float64(l), name)
		}
		if c.Machine != nil && c.Machine.Decides {
			counter("sluice_decisions_total", float64(c.Allowed()), name, "allowed")
			counter("sluice_decisions_total", float64(c.Limited()), name, "limited")
		}
		if f := c.Failed(); f > 0 {
			counter("sluice_command_errors_total", float64(f), name)
		}
		nanos, buckets := c.Latency()
		ch <- histogram(m.d["sluice_command_duration_seconds"], buckets[:], nanos, name)
	}
	for _, r := range m.env.Stats.Rules.Counts() {
		counter("sluice_rule_decisions_total", float64(r.Allowed), r.Domain, r.Rule, "allowed")
		counter("sluice_rule_decisions_total", float64(r.Limited), r.Domain, r.Rule, "limited")
		if r.ShadowRefused > 0 {
			counter("sluice_rule_shadow_refusals_total", float64(r.ShadowRefused), r.Domain, r.Rule)
		}
	}
	m.ruleLimits(gauge)
	if h := m.env.Hot; h != nil {
		top := h.Sketch.Top(10, h.Now())
		for rank := 1; rank <= 10; rank++ {
			v := 0.0
			if rank <= len(top) {
				v = float64(top[rank-1].Count)
			}
			gauge("sluice_throttled_top_refusals", v, strconv.Itoa(rank))
		}
	}
	for _, p := range m.env.Machine.PanicCounts() {
		counter("sluice_apply_panics_total", float64(p.Count), p.Command)
	}
	st := m.env.Stats
	gauge("sluice_connected_clients", float64(st.ConnectedClients.Load()))
	counter("sluice_connections_received_total", float64(st.ConnectionsReceived.Load()))
	counter("sluice_connections_rejected_total", float64(st.ConnectionsRejected.Load()))
	counter("sluice_expired_keys_total", float64(st.ExpiredKeys.Load()))
	ks := m.env.Machine.Keys().Stats()
	gauge("sluice_keys", float64(machine.UserKeys(ks)))
	rc := m.env.Machine.Reservations()
	gauge("sluice_reservations_held", float64(rc.Held))
	counter("sluice_reservations_total", float64(rc.Reserved), "reserved")
	counter("sluice_reservations_total", float64(rc.Settled), "settled")
	counter("sluice_reservations_total", float64(rc.Cancelled), "cancelled")
	counter("sluice_reservations_total", float64(rc.Expired), "expired")
	mem := &m.env.Memory
	gauge("sluice_used_memory_bytes", float64(mem.Used.Load()))
	gauge("sluice_maxmemory_bytes", float64(m.env.Tunables.MaxMemory.Load()))
	counter("sluice_oom_rejected_commands_total", float64(mem.RejectedOOM.Load()))
	gauge("sluice_used_memory_clients_bytes", float64(mem.Clients.Load()))
	gauge("sluice_maxmemory_clients_bytes", float64(m.env.MaxMemoryClients()))
	counter("sluice_evicted_clients_total", float64(mem.EvictedClients.Load()))
	gauge("sluice_offheap_allocated_bytes", float64(ks.OffHeap.Allocated))
	gauge("sluice_offheap_held_bytes", float64(ks.OffHeap.Held))
	if m.store != nil {
		pc := m.store.Counters()
		counter("sluice_quota_store_commits_total", float64(pc.Commits))
		counter("sluice_quota_store_syncs_total", float64(pc.Syncs))
		counter("sluice_quota_store_changes_total", float64(pc.Written))
		gauge("sluice_quota_store_failed", flag(pc.StoreFailed))
		gauge("sluice_snapshot_timestamp_seconds", float64(pc.SnapshotCreated)/1e9)
		gauge("sluice_snapshot_duration_seconds", pc.SnapshotTook.Seconds())
		gauge("sluice_snapshot_bytes", float64(pc.SnapshotBytes))
		gauge("sluice_snapshot_failed", flag(pc.SnapshotFailed))
		counter("sluice_snapshot_skipped_keys_total", float64(pc.SnapshotSkippedKeys))
	}
	if cg, ok := m.env.CrossGroup.(interface{ Counts() crossgroup.Counts }); ok {
		k := cg.Counts()
		counter("sluice_crossgroup_checks_total", float64(k.Admitted), "admitted")
		counter("sluice_crossgroup_checks_total", float64(k.Refused), "refused")
		counter("sluice_crossgroup_checks_total", float64(k.Failed), "failed")
		counter("sluice_crossgroup_checks_total", float64(k.Unknown), "unknown")
		counter("sluice_crossgroup_parts_total", float64(k.Parts))
		counter("sluice_crossgroup_part_finishes_total", float64(k.Settled), "settled")
		counter("sluice_crossgroup_part_finishes_total", float64(k.Cancelled), "cancelled")
		counter("sluice_crossgroup_part_finishes_total", float64(k.Lost), "lost")
	}
	if mv, ok := m.env.Migrations.(interface{ Stats() slotmove.Stats }); ok {
		st := mv.Stats()
		counter("sluice_slot_migration_chunks_total", float64(st.Chunks))
		counter("sluice_slot_migration_keys_total", float64(st.Keys))
		counter("sluice_slot_migration_bytes_total", float64(st.Bytes))
		cum := map[float64]uint64{}
		var total uint64
		for i, b := range slotmove.CutoverBounds {
			total += uint64(st.Cutover[i])
			cum[b.Seconds()] = total
		}
		total += uint64(st.Cutover[len(slotmove.CutoverBounds)])
		ch <- prometheus.MustNewConstHistogram(m.d["sluice_slot_migration_cutover_seconds"], total, float64(st.CutoverNanos)/1e9, cum)
	}
	if mp := m.env.MemberPort; mp != nil {
		open, pending := mp.Conns()
		gauge("sluice_member_port_connections", float64(open), "open")
		gauge("sluice_member_port_connections", float64(pending), "pending")
		refused := mp.Refused()
		reasons := make([]string, 0, len(refused))
		for r := range refused {
			reasons = append(reasons, r)
		}
		slices.Sort(reasons)
		for _, r := range reasons {
			counter("sluice_member_port_refused_total", float64(refused[r]), r)
		}
	}
	if r := m.env.Shards; r != nil {
		mp := r.Map()
		gauge("sluice_cluster_map_epoch", float64(r.Epoch()))
		conflicted := 0
		for _, c := range r.Conflicts() {
			conflicted += c.To - c.From + 1
		}
		gauge("sluice_cluster_conflicting_slots", float64(conflicted))
		fenced := 0.0
		if o := m.env.Machine.Owned(); o != nil {
			fenced = float64(o.Epoch)
		}
		gauge("sluice_cluster_fenced_epoch", fenced)
		running, pending := 0, 0.0
		if o := m.env.Machine.Owned(); o != nil {
			for _, j := range o.Jobs {
				if j.State != machine.JobRunning {
					continue
				}
				running++
				if j.Pending != nil {
					pending = max(pending, float64(m.env.Machine.Applied()-j.Updated)/1e9)
				}
			}
		}
		gauge("sluice_slot_migrations_running", float64(running))
		gauge("sluice_slot_migration_pending_seconds", pending)
		for g := range mp.Groups {
			if mp.Groups[g].Removed {
				continue
			}
			slots := 0
			for _, rg := range r.Ranges(g) {
				slots += rg[1] - rg[0] + 1
			}
			gauge("sluice_cluster_group_slots", float64(slots), mp.Groups[g].ID)
			known, leader := false, ""
			var lag int64
			lagKnown := false
			if g == r.Self() {
				known = m.env.Cluster != nil && m.env.Cluster.LiveLeader()
				if known {
					_, leader, _ = m.env.Cluster.Leader()
				}
				lag, lagKnown = time.Now().UnixNano()-m.env.Machine.Applied(), m.env.Machine.Applied() > 0
				gauge("sluice_cluster_member_group", 1, mp.Groups[g].ID)
			} else {
				leader, known = r.Leader(g)
				lag, lagKnown = r.Lag(g)
			}
			gauge("sluice_cluster_group_leader_known", flag(known), mp.Groups[g].ID)
			if known && leader != "" {
				gauge("sluice_cluster_group_leader", 1, mp.Groups[g].ID, leader)
			}
			if lagKnown {
				gauge("sluice_cluster_group_lag_seconds", float64(lag)/1e9, mp.Groups[g].ID)
			}
		}
	}
	if n := m.env.Cluster; n != nil {
		s := n.Status()
		for _, state := range []string{"Leader", "Follower", "Candidate", "Shutdown"} {
			gauge("sluice_raft_state", flag(s.State == state), state)
		}
		gauge("sluice_raft_term", float64(s.Term))
		gauge("sluice_raft_leader_live", flag(n.LiveLeader()))
		gauge("sluice_raft_last_index", float64(s.LastIndex))
		gauge("sluice_raft_commit_index", float64(s.CommitIndex))
		gauge("sluice_raft_applied_index", float64(s.AppliedIdx))
		counter("sluice_raft_leader_changes_total", float64(s.LeaderChanges))
		buckets, nanos := n.CommitLatency()
		ch <- histogram(m.d["sluice_raft_commit_duration_seconds"], buckets, nanos)
		ch <- sizeHistogram(m.d["sluice_raft_batch_commands"], n.BatchSizes())
		counter("sluice_snapshot_skipped_keys_total", float64(n.SnapshotSkippedKeys()))
		if peers, err := n.Peers(); err == nil {
			for _, p := range peers {
				if p.Self {
					continue
				}
				contact := -1.0
				if p.LastContact >= 0 {
					contact = p.LastContact.Seconds()
				}
				gauge("sluice_raft_peer_last_contact_seconds", contact, p.ID)
				gauge("sluice_raft_peer_match_index", float64(p.MatchIndex), p.ID)
				// A member whose state this node does not know has no
				// sample: its absence pages nobody.
				if p.Known {
					gauge("sluice_raft_peer_online", flag(p.Online), p.ID)
				}
			}
		}
	}
}

func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// histogram is a Prometheus histogram of power-of-two microsecond buckets
// (commands.LatencyBuckets layout; counts per bucket, not cumulative) with
// their total in nanoseconds.
func histogram(d *prometheus.Desc, buckets []int64, nanos int64, labels ...string) prometheus.Metric {
	cum := make(map[float64]uint64, len(buckets))
	var total uint64
	for i, n := range buckets {
		total += uint64(n)
		cum[float64(commands.BucketUpperMicros(i))/1e6] = total
	}
	return prometheus.MustNewConstHistogram(d, total, float64(nanos)/1e9, cum, labels...)
}

// sizeHistogram is a histogram of power-of-two size buckets (bucket i:
// sizes in [2^i, 2^(i+1))); the sum is approximated by the lower bounds.
func sizeHistogram(d *prometheus.Desc, buckets []int64) prometheus.Metric {
	cum := make(map[float64]uint64, len(buckets))
	var total uint64
	var sum float64
	for i, n := range buckets {
		total += uint64(n)
		sum += float64(n) * float64(int64(1)<<i)
		cum[float64(int64(1)<<(i+1)-1)] = total
	}
	return prometheus.MustNewConstHistogram(d, total, sum, cum)
}
