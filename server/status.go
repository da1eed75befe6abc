package server

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/internal/secret"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/shardmap"
)

// The status page: / on the HTTP listener is one HTML file (no build step,
// no CDN) that polls /status.json every second. Both are read-only, and
// behind the password when --requirepass is set (HTTP Basic, any user
// name); /healthz and /readyz stay open for probes.

//go:embed status.html
var statusPage []byte

// statusWindow is how far back the page's rates and p99 look.
const statusWindow = time.Minute

// statusSample is the decision counters at one instant.
type statusSample struct {
	at               time.Time
	allowed, limited int64
	buckets          [commands.LatencyBuckets]int64
}

// statusSampler keeps a minute of samples, one a second.
type statusSampler struct {
	mu      sync.Mutex
	samples []statusSample
}

func (s *Server) sampleStatus() statusSample {
	sm := statusSample{at: time.Now()}
	for _, c := range s.table.Commands() {
		if c.Machine == nil || !c.Machine.Decides {
			continue
		}
		sm.allowed += c.Allowed()
		sm.limited += c.Limited()
		_, b := c.Latency()
		for i := range b {
			sm.buckets[i] += b[i]
		}
	}
	return sm
}

// runStatusSampler records a sample a second while the server runs.
func (s *Server) runStatusSampler() {
	defer s.bg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		s.status.add(s.sampleStatus())
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

func (st *statusSampler) add(sm statusSample) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.samples = append(st.samples, sm)
	for len(st.samples) > 1 && sm.at.Sub(st.samples[0].at) > statusWindow {
		st.samples = st.samples[1:]
	}
}

// window is the oldest sample of the last minute (the zero sample if none).
func (st *statusSampler) window() statusSample {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.samples) == 0 {
		return statusSample{}
	}
	return st.samples[0]
}

// statusAuthorized checks HTTP Basic (any user) or Bearer against the
// password; with none set, everyone may read.
func (s *Server) statusAuthorized(w http.ResponseWriter, r *http.Request) bool {
	return s.passwordAuthorized(w, r, "the status page")
}

// passwordAuthorized checks HTTP Basic (any user) or Bearer against the
// password and answers 401 naming what needs it; with none set, everyone
// may read.
func (s *Server) passwordAuthorized(w http.ResponseWriter, r *http.Request, what string) bool {
	pw := s.cfg.RequirePass
	if pw == "" {
		return true
	}
	got := ""
	if _, p, ok := r.BasicAuth(); ok {
		got = p
	} else if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		got = b
	}
	if secret.Equal(pw, got) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="sluice", charset="UTF-8"`)
	http.Error(w, what+" needs sluice's password (--requirepass)", http.StatusUnauthorized)
	return false
}

func (s *Server) statusHTML(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if !s.statusAuthorized(w, r) {
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'")
	w.Write(statusPage)
}

// statusJSON is what the page shows.
type statusJSON struct {
	Version   string         `json:"version"`
	Node      string         `json:"node"`
	Role      string         `json:"role"`
	Leader    string         `json:"leader"`
	Term      uint64         `json:"term"`
	Members   []statusMember `json:"members"`
	Window    float64        `json:"window_seconds"`
	Decisions float64        `json:"decisions_per_second"`
	Refusals  float64        `json:"refusals_per_second"`
	P99ms     float64        `json:"p99_ms"`
	Allowed   int64          `json:"allowed_total"`
	Limited   int64          `json:"limited_total"`
	Keys      int            `json:"keys"`
	TopKeys   []statusTopKey `json:"top_refused_keys"`
	Rules     []statusRule   `json:"rules"`
	Overrides []statusOverr  `json:"overrides"`
	Scales    []statusScale  `json:"scales"`
	Persist   [][2]string    `json:"persistence"`
	// Groups are a sharded cluster's groups (none otherwise).
	Groups []statusGroup `json:"groups,omitempty"`
	// Migrations are the groups' running and recently ended slot
	// migrations.
	Migrations []statusMigration `json:"migrations,omitempty"`
	Indexes    map[string]uint   `json:"raft_indexes,omitempty"`
	// CountedAt says, on a follower, where decisions are made and counted:
	// the leader (a follower redirects RESP clients and forwards gRPC and
	// HTTP calls, so its own figures stay near zero).
	CountedAt string `json:"decisions_counted_at,omitempty"`
}

type statusMember struct {
	ID     string `json:"id"`
	Addr   string `json:"addr"`
	Role   string `json:"role"`
	Online bool   `json:"online"`
	// State is online, offline, or unknown (a follower with no fresh word
	// from the leader about a sibling: not failed, not known live).
	State         string  `json:"state"`
	LastContactMS int64   `json:"last_contact_ms"`
	MatchIndex    uint64  `json:"match_index"`
	Behind        *uint64 `json:"entries_behind,omitempty"`
}

type statusTopKey struct {
	Key      string `json:"key"`
	Refusals int64  `json:"refusals"`
}

type statusRule struct {
	Domain    string `json:"domain"`
	Rule      string `json:"rule"`
	Path      string `json:"path"`
	Algorithm string `json:"algorithm"`
	Limit     int64  `json:"limit"`
	// InForce is the limit decisions use now: Limit under the domain's
	// scale factor; Overridden lists the descriptors an RL.OVERRIDE gives
	// another limit ("k=v,k=v: limit/window s").
	InForce    int64    `json:"limit_in_force"`
	Overridden []string `json:"overridden,omitempty"`
	Window     int64    `json:"window_seconds"`
	Shadow     bool     `json:"shadow"`
	Source     string   `json:"source"`
}

// statusGroup is one group of a sharded cluster.
// statusMigration is a running or recently ended slot migration out of a
// group: its slots, how many have moved (this group's own: its log's
// count; another group's: its leader's view, ended or not), its state.
type statusMigration struct {
	ID     string `json:"id,omitempty"`
	From   string `json:"from"`
	To     string `json:"to"`
	Slots  string `json:"slots"`
	Total  int    `json:"slots_total"`
	Moved  int    `json:"slots_moved"`
	State  string `json:"state"`
	Keys   int64  `json:"keys_moved"`
	Detail string `json:"detail,omitempty"`
}

// recentMigrations is how long the status page lists a migration of this
// group's that ended.
const recentMigrations = 15 * time.Minute

// groupMigrations are group g's migrations as this member knows them.
func (s *Server) groupMigrations(g int, id string, now time.Time) []statusMigration {
	r := s.router
	count := func(rs [][2]int) (n int) {
		for _, rg := range rs {
			n += rg[1] - rg[0] + 1
		}
		return n
	}
	text := func(rs [][2]int) string {
		var out []string
		for _, rg := range rs {
			out = append(out, shardmap.Range{From: rg[0], To: rg[1]}.String())
		}
		return strings.Join(out, ", ")
	}
	var out []statusMigration
	if g == r.Self() {
		o := s.env.Machine.Owned()
		if o == nil {
			return nil
		}
		for _, j := range o.Jobs {
			if j.State != machine.JobRunning && now.UnixNano()-j.Ended > int64(recentMigrations) {
				continue
			}
			total := count(j.Ranges)
			out = append(out, statusMigration{ID: j.ID, From: id, To: j.TargetGroup, Slots: text(j.Ranges), Total: total,
				Moved: total - count(j.Remaining()), State: j.State, Keys: int64(j.Keys)})
		}
		return out
	}
	for _, v := range r.JobViews(g) {
		if !v.Shown(now) {
			continue
		}
		m := statusMigration{From: id, To: v.Target, Slots: text(v.Ranges), Total: count(v.Ranges), State: "running",
			Moved: -1, Keys: -1, Detail: "as its group's leader reports it"}
		if v.Until != 0 {
			m.State, m.Moved = "ended", m.Total
		}
		out = append(out, m)
	}
	return out
}

type statusGroup struct {
	ID      string   `json:"id"`
	Slots   string   `json:"slots"`
	Leader  string   `json:"leader"`
	Members []string `json:"members"`
	// Self: this node's group.
	Self bool `json:"self"`
}

type statusOverr struct {
	Domain     string `json:"domain"`
	Descriptor string `json:"descriptor"`
	Limit      int64  `json:"limit"`
	Window     int64  `json:"window_seconds"`
	Until      int64  `json:"until"`
}

type statusScale struct {
	Domain string `json:"domain"`
	Factor string `json:"factor"`
	Target string `json:"target"`
}

func (s *Server) statusData() statusJSON {
	e := s.env
	now := s.sampleStatus()
	old := s.status.window()
	out := statusJSON{Version: s.cfg.Version, Node: e.NodeID, Role: "single node", Allowed: now.allowed, Limited: now.limited,
		// The keyspace's own count of users' keys, as sluice_keys (expired
		// keys not yet swept included): counting live keys would walk
		// every record on every refresh.
		Keys: machine.UserKeys(e.Machine.Keys().Stats())}
	if secs := now.at.Sub(old.at).Seconds(); !old.at.IsZero() && secs > 0 {
		out.Window = secs
		out.Decisions = float64(now.allowed+now.limited-old.allowed-old.limited) / secs
		out.Refusals = float64(now.limited-old.limited) / secs
		var diff [commands.LatencyBuckets]int64
		var total int64
		for i := range diff {
			diff[i] = now.buckets[i] - old.buckets[i]
			total += diff[i]
		}
		if total > 0 {
			rank, seen := (total*99+99)/100, int64(0)
			for i, n := range diff {
				if seen += n; seen >= rank {
					out.P99ms = float64(commands.BucketUpperMicros(i)) / 1000
					break
				}
			}
		}
	}
	if n := s.node; n != nil {
		st := n.Status()
		out.Role, out.Term = strings.ToLower(st.State), st.Term
		out.Node = n.Self()
		if id, addr, ok := n.Leader(); ok {
			out.Leader = id + " " + addr
			if !n.Serving() {
				out.CountedAt = "on the leader, " + id + " (" + addr + "): this follower redirects RESP clients and forwards gRPC and HTTP calls there"
			}
		} else if !n.Serving() {
			out.CountedAt = "on the leader, and none is known now"
		}
		out.Indexes = map[string]uint{"last": uint(st.LastIndex), "commit": uint(st.CommitIndex), "applied": uint(st.AppliedIdx)}
		if peers, err := n.Peers(); err == nil {
			// How far behind a member is: on the leader against its own last
			// index; on a follower against the leader's, as the leader's last
			// note gives it and the others' match indexes (one note, one
			// instant).
			var leaderIndex uint64
			for _, p := range peers {
				if p.Leader && p.Known {
					leaderIndex = p.MatchIndex
				}
			}
			if n.Serving() {
				leaderIndex = st.LastIndex
			}
			for _, p := range peers {
				role := "follower"
				if p.Leader {
					role = "leader"
				}
				m := statusMember{ID: p.ID, Addr: p.ClientAddr, Role: role, Online: p.Known && p.Online, State: p.Health(),
					LastContactMS: -1, MatchIndex: p.MatchIndex}
				if p.LastContact >= 0 {
					m.LastContactMS = p.LastContact.Milliseconds()
				}
				if leaderIndex > 0 && !p.Leader && p.Known {
					b := leaderIndex - min(p.MatchIndex, leaderIndex)
					m.Behind = &b
				}
				out.Members = append(out.Members, m)
			}
		}
	}
	if r := s.router; r != nil {
		m := r.Map()
		for g := range m.Groups {
			grp := &m.Groups[g]
			if grp.Removed {
				continue
			}
			sg := statusGroup{ID: grp.ID, Self: g == r.Self()}
			var ranges []string
			for _, rg := range r.Ranges(g) {
				ranges = append(ranges, shardmap.Range{From: rg[0], To: rg[1]}.String())
			}
			sg.Slots = strings.Join(ranges, ", ")
			for _, p := range grp.Members {
				sg.Members = append(sg.Members, p.ID+" "+p.ClientAddr)
			}
			if sg.Self {
				if id, addr, ok := s.node.Leader(); ok {
					sg.Leader = id + " " + addr
				}
			} else if addr, ok := r.Leader(g); ok {
				sg.Leader = addr
				for _, p := range grp.Members {
					if p.ClientAddr == addr {
						sg.Leader = p.ID + " " + addr // by id and address, as this group's
					}
				}
			}
			out.Groups = append(out.Groups, sg)
			out.Migrations = append(out.Migrations, s.groupMigrations(g, grp.ID, now.at)...)
		}
	}
	if h := e.Hot; h != nil {
		for _, c := range h.Sketch.Top(10, h.Now()) {
			out.TopKeys = append(out.TopKeys, statusTopKey{Key: c.Key, Refusals: c.Count})
		}
	}
	if rs := e.Machine.Rules(); rs != nil && rs.Set != nil {
		clock := e.Clock.Now()
		for _, d := range rs.Set.Domains() {
			domain := rs.Set.Domain(d)
			factor, to := e.Machine.DomainScale(d, clock)
			overrides := e.Machine.DomainOverrides(d, clock)
			for _, r := range domain.Rules {
				sr := statusRule{Domain: r.Domain, Rule: r.ID(), Path: r.Path, Algorithm: r.Algorithm.String(),
					Limit: r.Limit, InForce: machine.Scale(r.Limit, factor), Window: limiter.Seconds(r.Window),
					Shadow: r.ShadowMode, Source: r.File + ":" + strconv.Itoa(r.Line)}
				for _, o := range overrides {
					// An override replaces the limit of the rule its
					// descriptor matches.
					if domain.Match(o.Entries) == r {
						sr.Overridden = append(sr.Overridden, descriptorText(o.Entries)+": "+strconv.FormatInt(o.Limit, 10)+
							"/"+strconv.FormatInt(o.Window/1e9, 10)+" s")
					}
				}
				out.Rules = append(out.Rules, sr)
			}
			for _, o := range overrides {
				out.Overrides = append(out.Overrides, statusOverr{Domain: d, Descriptor: descriptorText(o.Entries),
					Limit: o.Limit, Window: o.Window / 1e9, Until: o.Until / 1e9})
			}
			if factor != machine.ScaleUnit || to != machine.ScaleUnit {
				out.Scales = append(out.Scales, statusScale{Domain: d, Factor: machine.FormatFactor(factor), Target: machine.FormatFactor(to)})
			}
		}
	}
	if e.Snapshots != nil {
		for _, kv := range e.Snapshots.Info() {
			if statusPersistField(kv[0]) {
				out.Persist = append(out.Persist, kv)
			}
		}
	}
	return out
}

// descriptorText is a descriptor as RL.OVERRIDE LIST shows it: k=v,k=v.
func descriptorText(entries []policy.Entry) string {
	var desc []string
	for _, en := range entries {
		desc = append(desc, en.Key+"="+en.Value)
	}
	return strings.Join(desc, ",")
}

// statusPersistField reports whether the page shows an INFO persistence
// field (the rest stay in INFO).
func statusPersistField(name string) bool {
	switch name {
	case "rdb_changes_since_last_save", "rdb_last_save_time", "rdb_last_bgsave_status",
		"sluice_snapshot_keys", "sluice_snapshot_bytes", "sluice_quota_fsync",
		"sluice_quota_status", "sluice_quota_synced_seq":
		return true
	}
	return false
}

func (s *Server) statusJSONHandler(w http.ResponseWriter, r *http.Request) {
	if !s.statusAuthorized(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(s.statusData())
}
