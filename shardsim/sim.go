package shardsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/clock"
	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/crossgroup"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/member"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/shardmap"
	"github.com/sluice-rl/sluice/slot"
	"github.com/sluice-rl/sluice/slotmove"
)

// Config is a simulated cluster.
type Config struct {
	// Groups is how many groups; each owns an equal run of the slots.
	Groups int
	// Members is each group's size (default 3).
	Members int
	// Dir holds each member's Raft snapshots (the log and stable store
	// are in memory).
	Dir string
	// HeartbeatTimeout is Raft's (default 1 s: hundreds of members share
	// two CPUs; election timeout the same, lease 90% of it).
	HeartbeatTimeout time.Duration
	// Unsent and Lost are the chances, out of a million, that a call
	// between members (a part of a check across groups, its keep or
	// cancel) is dropped before it reaches the member, or after it applied
	// with its reply lost (SetFaults changes them).
	Unsent, Lost int
	// Log receives the members' events (nil: none).
	Log *slog.Logger
}

// Cluster is the simulated cluster.
type Cluster struct {
	cfg     Config
	Map     *shardmap.Map
	Members []*Member
	// Groups[g] are the indexes in Members of group g's members.
	Groups [][]int
	byAddr map[string]*Member
	stop   chan struct{}
	wg     sync.WaitGroup
	// unsent and lost are the fault chances in force (Config's).
	unsent, lost atomic.Int64
	// Unsent and Lost count the calls dropped before and after they
	// applied.
	Unsent, Lost atomic.Int64
}

// SetFaults sets the chances, out of a million, that a call between
// members is dropped before it is delivered or after it applied.
func (c *Cluster) SetFaults(unsent, lost int) {
	c.unsent.Store(int64(unsent))
	c.lost.Store(int64(lost))
}

// Member is one member: its node, state machine and command surface.
type Member struct {
	ID, Addr, RaftAddr string
	Group              int
	Node               *cluster.Node
	Env                *commands.Env
	Router             *shardmap.Router
	Coord              *crossgroup.Coordinator
	Moves              *slotmove.Driver
	trans              *raft.InmemTransport
	sessions           sync.Pool
	// cut is set while the member is cut off from its group.
	cut atomic.Bool
}

// Start starts every member and waits until every group leads and is
// fenced by the map.
func Start(cfg Config) (*Cluster, error) {
	if cfg.Groups < 1 || cfg.Groups > slot.Count {
		return nil, fmt.Errorf("shardsim: %d groups", cfg.Groups)
	}
	if cfg.Members == 0 {
		cfg.Members = 3
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{cfg: cfg, byAddr: map[string]*Member{}, stop: make(chan struct{})}
	c.SetFaults(cfg.Unsent, cfg.Lost)
	var b strings.Builder
	b.WriteString("epoch: 1\ngroups:\n")
	port := 20000
	for g := range cfg.Groups {
		from, to := g*slot.Count/cfg.Groups, (g+1)*slot.Count/cfg.Groups-1
		var members []string
		var idx []int
		for j := range cfg.Members {
			m := &Member{ID: fmt.Sprintf("g%dn%d", g+1, j+1), Group: g,
				Addr: "127.0.0.1:" + strconv.Itoa(port), RaftAddr: "127.0.0.1:" + strconv.Itoa(port+1)}
			port += 2
			members = append(members, fmt.Sprintf("%s: %q", m.ID, m.Addr+"@"+m.RaftAddr))
			idx = append(idx, len(c.Members))
			c.Members = append(c.Members, m)
			c.byAddr[m.Addr] = m
		}
		c.Groups = append(c.Groups, idx)
		fmt.Fprintf(&b, "  - id: g%d\n    slots: [\"%d-%d\"]\n    members: {%s}\n", g+1, from, to, strings.Join(members, ", "))
	}
	mp, err := shardmap.Parse([]byte(b.String()))
	if err != nil {
		return nil, err
	}
	c.Map = mp
	// Each group's members on one in-memory network.
	for _, idx := range c.Groups {
		for _, i := range idx {
			m := c.Members[i]
			_, m.trans = raft.NewInmemTransportWithTimeout(raft.ServerAddress(m.RaftAddr), 2*time.Second)
		}
		for _, i := range idx {
			for _, k := range idx {
				if i != k {
					c.Members[i].trans.Connect(raft.ServerAddress(c.Members[k].RaftAddr), c.Members[k].trans)
				}
			}
		}
	}
	for _, m := range c.Members {
		if err := c.startMember(m); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.wg.Add(1)
	go c.watch()
	if err := c.waitServing(60 * time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// startMember builds m's node, surface and coordinator.
func (c *Cluster) startMember(m *Member) error {
	group := &c.Map.Groups[m.Group]
	hb := c.cfg.HeartbeatTimeout
	n, err := cluster.NewNode(cluster.Config{
		NodeID: m.ID, Peers: group.Members, Dir: filepath.Join(c.cfg.Dir, m.ID),
		HeartbeatTimeout: hb, ElectionTimeout: hb, LeaderLeaseTimeout: hb * 9 / 10,
		ApplyTimeout: 5 * time.Second, Transport: m.trans, Log: c.cfg.Log,
		Stores: func(string, *slog.Logger) (raft.LogStore, raft.StableStore, io.Closer, error) {
			s := raft.NewInmemStore()
			return s, s, io.NopCloser(nil), nil
		},
	}, machine.New(machine.Options{}))
	if err != nil {
		return fmt.Errorf("shardsim: member %s: %w", m.ID, err)
	}
	return c.attach(m, n)
}

func (c *Cluster) attach(m *Member, n *cluster.Node) error {
	router, err := shardmap.NewRouter(c.Map, c.Map.Groups[m.Group].ID)
	if err != nil {
		return err
	}
	mach := n.Machine()
	router.SetOwnLog(mach.OwnsSlot)
	m.Node, m.Router = n, router
	m.Coord, err = crossgroup.New(crossgroup.Config{Router: router, Machine: mach, Timeout: 3 * time.Second,
		Members: members{c}, MemberAt: c.memberAt,
		LocalPlace: commands.Replicated{Node: n}.LocalPlace, LocalPart: commands.Replicated{Node: n}.LocalPart,
		Log: c.cfg.Log, OwnLeader: func() (string, bool) {
			_, addr, ok := n.Leader()
			return addr, ok && addr != ""
		}})
	if err != nil {
		return err
	}
	rep := commands.Replicated{Node: n}
	// Slot migrations driven as a server drives them: their imports go
	// through the same lossy calls as the checks' parts.
	m.Moves, err = slotmove.New(slotmove.Config{Router: router, Machine: mach, NodeID: m.ID, Log: c.cfg.Log,
		Serving: func() bool { return n.Serving() && !m.cut.Load() }, PlaceGroup: m.Coord.PlaceGroup, PlaceMember: m.Coord.PlaceMember,
		ReportOf:   func(_ context.Context, g int) (member.Report, error) { return c.reportOf(router, g) },
		ChunkSlots: 8, ChunkKeys: 20,
		Apply: rep.ApplyOne})
	if err != nil {
		return err
	}
	table := commands.NewTable(mach)
	m.Env = &commands.Env{Machine: mach, Clock: clock.New(nil), Table: table, Stats: &commands.Stats{},
		Cluster: n, Shards: router, CrossGroup: m.Coord, Migrations: m.Moves,
		Applier: commands.Replicated{Node: n, Shards: router, Fenced: func() bool { return fenced(mach, c.Map) }}}
	m.sessions.New = func() any { return m.Env.NewSession("sim") }
	return nil
}

// fenced reports whether a group's state machine fences by the map.
func fenced(m *machine.Machine, mp *shardmap.Map) bool {
	o := m.Owned()
	return o != nil && o.Epoch >= mp.Epoch
}

// watch is what each member's server does in the background: learn the
// other groups' leaders and the slots each group's log claims (here from
// the nodes themselves) and, leading, log its group's slots until fenced.
func (c *Cluster) watch() {
	defer c.wg.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		leaders := make([]string, len(c.Groups))
		for g, idx := range c.Groups {
			for _, i := range idx {
				m := c.Members[i]
				if m.Node.Serving() && !m.cut.Load() {
					leaders[g] = m.Addr
				}
			}
		}
		for _, m := range c.Members {
			for g, addr := range leaders {
				if g != m.Group {
					m.Router.SetLeader(g, addr)
				}
				if l := c.byAddr[addr]; l != nil {
					if o := l.Env.Machine.Owned(); o != nil {
						m.Router.Claim(g, o.Epoch, o.Ranges)
					}
				}
			}
			if o := m.Env.Machine.Owned(); o != nil {
				m.Router.Claim(m.Group, o.Epoch, o.Ranges)
			}
			if m.Node.Serving() && !fenced(m.Env.Machine, c.Map) {
				args := [][]byte{[]byte("SLUICE.OWN"), []byte("1")}
				for _, r := range m.Router.OwnedRanges() {
					args = append(args, []byte(r))
				}
				commands.Replicated{Node: m.Node}.ApplyAll([][][]byte{args})
			}
		}
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
	}
}

// waitServing waits until every group has a fenced, serving leader.
func (c *Cluster) waitServing(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ready := 0
		for _, idx := range c.Groups {
			for _, i := range idx {
				m := c.Members[i]
				if m.Node.Serving() && fenced(m.Env.Machine, c.Map) {
					ready++
					break
				}
			}
		}
		if ready == len(c.Groups) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("shardsim: %d of %d groups serving after %s", ready, len(c.Groups), limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Leader is group g's serving leader, or nil.
func (c *Cluster) Leader(g int) *Member {
	for _, i := range c.Groups[g] {
		if m := c.Members[i]; m.Node.Serving() {
			return m
		}
	}
	return nil
}

// Cut cuts group g's leader off from the rest of its group (both ways)
// for d, then joins it again; the others elect a leader meanwhile.
func (c *Cluster) Cut(g int, d time.Duration) {
	l := c.Leader(g)
	if l == nil {
		return
	}
	l.cut.Store(true)
	for _, i := range c.Groups[g] {
		if o := c.Members[i]; o != l {
			l.trans.Disconnect(raft.ServerAddress(o.RaftAddr))
			o.trans.Disconnect(raft.ServerAddress(l.RaftAddr))
		}
	}
	time.Sleep(d)
	for _, i := range c.Groups[g] {
		if o := c.Members[i]; o != l {
			l.trans.Connect(raft.ServerAddress(o.RaftAddr), o.trans)
			o.trans.Connect(raft.ServerAddress(l.RaftAddr), l.trans)
		}
	}
	l.cut.Store(false)
}

// Do runs one command on member m, as a client connected to it would, and
// returns the reply as go-redis decodes it.
func (m *Member) Do(args ...string) (any, error) {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	s := m.sessions.Get().(*commands.Session)
	defer m.sessions.Put(s)
	out, err := s.Do(b)
	if err != nil {
		return nil, err
	}
	v, err := resp.DecodeReply(out)
	if errors.Is(err, resp.ErrNull) {
		err = redis.Nil
	}
	return v, err
}

// Route runs a keyed command as a cluster client does: on a random
// member, following MOVED, retrying TRYAGAIN and CLUSTERDOWN until ctx
// ends. The reply is the last one.
func (c *Cluster) Route(ctx context.Context, rng *rand.Rand, args ...string) (any, error) {
	m := c.Members[rng.IntN(len(c.Members))]
	for {
		v, err := m.Do(args...)
		var e resp.ReplyError
		if !errors.As(err, &e) {
			return v, err
		}
		f := strings.Fields(string(e))
		switch {
		case len(f) == 3 && f[0] == "MOVED":
			if to := c.byAddr[f[2]]; to != nil {
				m = to
				continue
			}
		case f[0] != "TRYAGAIN" && f[0] != "CLUSTERDOWN":
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(20 * time.Millisecond):
		}
		if f[0] != "MOVED" {
			m = c.Members[rng.IntN(len(c.Members))]
		}
	}
}

// Close stops every member.
func (c *Cluster) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.wg.Wait()
	for _, m := range c.Members {
		if m.Moves != nil {
			m.Moves.Close()
		}
		if m.Coord != nil {
			m.Coord.Close()
		}
	}
	for _, m := range c.Members {
		if m.Node != nil {
			m.Node.Close()
		}
	}
}

// errDropped is a call the simulated network lost.
var errDropped = errors.New("shardsim: the call was lost")

// reportOf is group g's leader's report, as router knows the leader (a
// member cut off answers nothing).
func (c *Cluster) reportOf(router *shardmap.Router, g int) (member.Report, error) {
	addr, ok := router.Leader(g)
	if g == router.Self() {
		for _, m := range c.Members {
			if m.Router == router {
				return commands.Replicated{Node: m.Node}.Report(time.Now()), nil
			}
		}
	}
	m := c.byAddr[addr]
	if !ok || m == nil || m.cut.Load() {
		return member.Report{}, fmt.Errorf("%w: %w: no leader of group %d reachable", member.ErrUnreachable, errDropped, g)
	}
	return commands.Replicated{Node: m.Node}.Report(time.Now()), nil
}

// Part delivers a part of a check.
func (k members) Part(_ context.Context, to member.Addr, req *machine.PartRequest) (machine.PartResult, error) {
	return deliver(k.c, to, func(r commands.Replicated) (machine.PartResult, string, error) { return r.Part(req) })
}

// Place delivers a placement request.
func (k members) Place(_ context.Context, to member.Addr, req *machine.PlacementRequest) (machine.PlacementResult, error) {
	return deliver(k.c, to, func(r commands.Replicated) (machine.PlacementResult, string, error) { return r.Place(req) })
}

// deliver runs call at the member at to, as the member port would: some
// calls are lost before they are sent, some after they applied.
func deliver[R any](c *Cluster, to member.Addr, call func(commands.Replicated) (R, string, error)) (R, error) {
	var none R
	if rand.Int64N(1_000_000) < c.unsent.Load() {
		c.Unsent.Add(1)
		return none, fmt.Errorf("%w: %w before it was sent", member.ErrUnreachable, errDropped)
	}
	m := c.byAddr[to.Port]
	if m == nil || m.cut.Load() {
		return none, fmt.Errorf("%w: %w: no member at %s", member.ErrUnreachable, errDropped, to.Port)
	}
	if c.Map.Groups[m.Group].ID != to.Group {
		return none, member.ErrWrongGroup
	}
	res, leader, err := call(commands.Replicated{Node: m.Node})
	if errors.Is(err, member.ErrNotLeader) {
		return none, &member.NotLeaderError{Leader: leader}
	}
	if rand.Int64N(1_000_000) < c.lost.Load() {
		c.Lost.Add(1)
		return none, fmt.Errorf("%w: %w after it applied", member.ErrUnknownOutcome, errDropped)
	}
	return res, err
}

// members delivers what members send each other in process, as the
// member port would (package member), losing some as caller does.
type members struct{ c *Cluster }

// memberAt is where the member at a client address takes member calls:
// in process, its client address names it.
func (c *Cluster) memberAt(addr string) (member.Addr, bool) {
	m := c.byAddr[addr]
	if m == nil {
		return member.Addr{}, false
	}
	return member.Addr{Port: addr, Group: c.Map.Groups[m.Group].ID}, true
}
