package commands

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/sluice-rl/sluice/clock"
	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/crossgroup"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/pubsub"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/shardmap"
	"github.com/sluice-rl/sluice/slotmove"
)

// Options are the server settings commands consult.
type Options struct {
	// RequirePass is the password of the default user; empty means no
	// authentication.
	RequirePass string
	// EnableDebug allows the DEBUG command (the test clock).
	EnableDebug bool
	// Version is sluice's own version, reported by INFO.
	Version string
	// Addr is the address the server listens on, for INFO and topology.
	Addr string
	// DataDir is where state is kept, for INFO and CONFIG GET dir.
	DataDir string
	// MaxClients is the most connections served at once.
	MaxClients int
	// IdleTimeout closes connections idle this many seconds (0 = never).
	IdleTimeoutSeconds int64
	// AdvertiseAddr is the host:port cluster topology replies announce;
	// empty means the listen address (see Env.announceAddr).
	AdvertiseAddr string
	// LogLevel is reported by CONFIG GET loglevel.
	LogLevel string
	// ProtectedMode, ProtoMaxBulkLen and OutputBufferLimit are the protocol
	// guard's settings, reported by CONFIG GET.
	ProtectedMode     bool
	ProtoMaxBulkLen   int64
	OutputBufferLimit int
}

// RedisVersion is the Redis version sluice answers as: the command set and
// replies it follows are Redis 7.2's.
const RedisVersion = "7.2.0"

// Stats are counters the server and commands share; INFO and the metrics
// endpoint read them.
type Stats struct {
	ConnectionsReceived atomic.Int64
	ConnectionsRejected atomic.Int64
	ConnectedClients    atomic.Int64
	ExpiredKeys         atomic.Int64
	// NetInputBytes and NetOutputBytes are added once per pipeline, not
	// per command, to keep shared counters off the hot path.
	NetInputBytes  atomic.Int64
	NetOutputBytes atomic.Int64
	// Rules counts RL.CHECK decisions by rule.
	Rules RuleStats
}

// Applier runs state machine commands: the machine itself on a single
// node; through a replication log in a cluster.
type Applier interface {
	Apply(now int64, cmd *machine.Command, args [][]byte, w *resp.Writer) machine.Outcome
}

// CrossGroup runs checks across the groups of a sharded cluster (package
// crossgroup).
type CrossGroup interface {
	// Spans reports whether an RL.CHECK or RL.SHOULDRATELIMIT charges a
	// counter another group owns.
	Spans(args [][]byte) bool
	// Decide runs such a check and returns its answer.
	Decide(ctx context.Context, args [][]byte) (crossgroup.Result, error)
	// ReserveSpans and Reserve are Spans and Decide for RL.RESERVE.
	ReserveSpans(args [][]byte) bool
	Reserve(ctx context.Context, args [][]byte) (crossgroup.Result, error)
	// SettleSpans reports whether an RL.SETTLE or RL.CANCEL's reservation
	// is held in other groups too; Settle settles it there and here.
	SettleSpans(args [][]byte) bool
	Settle(ctx context.Context, args [][]byte) (rows []machine.SettleRow, held bool, err error)
	// Propagate applies a configuration command this group applied in
	// every other group.
	Propagate(ctx context.Context, args [][]byte) error
	// RulesDiffer is "" when every group holds the rules this one does
	// for domain ("" for all), else each group's rules digest.
	RulesDiffer(ctx context.Context, domain string) (string, error)
}

// Migrations moves slots between the groups of a sharded cluster
// (package slotmove).
type Migrations interface {
	// Migrate starts one job per spec, all or none.
	Migrate(specs []slotmove.Spec) error
	// Cancel cancels the running jobs and says how many there were.
	Cancel() (int, error)
	// Jobs are the group's jobs, oldest first.
	Jobs() []machine.Job
	// AddGroup adds a group to the running cluster; RemoveGroup removes
	// one that owns no slots.
	AddGroup(ctx context.Context, id string, members []cluster.Peer) error
	RemoveGroup(ctx context.Context, id string) error
	// HoldAfter stops the jobs after a step (a test hook: DEBUG
	// SLOTMOVE-HOLD).
	HoldAfter(step string) error
}

// Env is what every command can reach: the state machine, the clock, the
// settings and the counters. One Env serves one server.
type Env struct {
	// Machine is the replicated state. Surface commands only read it
	// (SCAN, KEYS, CLUSTER, INFO), at Machine.ReadInstant.
	Machine *machine.Machine
	// Applier applies the machine's commands; nil means Machine directly.
	Applier Applier
	// Shards, on a member of a sharded cluster, routes each slot to the
	// group that owns it (nil otherwise).
	Shards *shardmap.Router
	// CrossGroup, on a member of a sharded cluster, runs an RL.CHECK or
	// RL.SHOULDRATELIMIT whose counters reach another group (nil
	// otherwise).
	CrossGroup CrossGroup
	// Migrations, on a member of a sharded cluster, starts, cancels and
	// lists slot migrations (package slotmove); nil otherwise.
	Migrations Migrations
	// Cluster is the replicated node this server is a member of; nil on a
	// single node.
	Cluster *cluster.Node
	Clock   *clock.Clock
	Options Options
	Stats   *Stats
	Table   *Table
	// Started is the instant the server started, Unix ns.
	Started int64
	// RunID identifies this server process (40 hex characters).
	RunID string
	// Durable says whether journaled changes can reach the disk; nil when
	// nothing persists (tests).
	Durable DurableHealth
	// Snapshots answers SAVE, BGSAVE, LASTSAVE and INFO persistence; nil
	// when nothing persists.
	Snapshots Snapshots
	// NodeID is the cluster node id (40 hex characters), kept in the data
	// directory so it survives restarts.
	NodeID string
	// Clients is the server's registry of connections, for CLIENT LIST and
	// CLIENT KILL; nil when commands run without a server (tests).
	Clients Clients
	// Tunables are the settings CONFIG SET changes at run time.
	Tunables Tunables
	// Memory is the process' sampled memory use, against maxmemory and
	// maxmemory-clients.
	Memory Memory
	// Transport, when set, is how much of the heap the member port's
	// transports hold in buffers (Raft's, per connection): not state,
	// left out of used_memory (nil: none).
	Transport func() int64
	// MemberPort, on a member with a port of its own, is the port's
	// connections held and pending, and those it refused by reason (the
	// metrics; nil: none).
	MemberPort interface {
		Conns() (open, pending int64)
		Refused() map[string]int64
	}
	// PubSub routes published messages and throttle events; never nil in a
	// server (NewEnv-free callers must set it before pub/sub commands).
	PubSub *pubsub.Hub
	// Hot counts the most refused keys (THROTTLED.TOP); nil: not kept.
	Hot *HotKeys
}

// Conn is one client connection's state. Only the connection's own
// goroutine writes it; Name, LibName, LibVer, Proto and Flags are also read
// by other connections (CLIENT LIST), so they are written under mu with the
// set* methods (see client.go), and read by others only through Snapshot.
type Conn struct {
	ID            int64
	Addr          string
	LocalAddr     string
	Proto         int
	Authenticated bool
	Name          string
	LibName       string
	LibVer        string
	// Flags are the CLIENT LIST flags the client set (READONLY, NO-EVICT …).
	Flags ConnFlags
	mu    sync.Mutex
	// Created is the instant the connection was accepted, Unix ns.
	Created int64
	// durable is the latest change whose reply must wait until it is on
	// disk (see AwaitDurable).
	durable Ticket
	// tx is the connection's transaction (MULTI … EXEC) and watched keys.
	tx txState
	// Close asks the server to close the connection once the reply is out.
	Close bool
	// Sink is where this connection's pub/sub messages go (set by the
	// server; nil: the connection cannot subscribe). Sub holds its
	// subscriptions, nil until the first SUBSCRIBE.
	Sink pubsub.Sink
	Sub  *pubsub.Subscriber
}

// Subscribed reports whether the connection holds a subscription.
func (c *Conn) Subscribed() bool { return c.Sub != nil && c.Sub.Count() > 0 }

// Ctx is one command's context: where it runs and where its reply goes.
type Ctx struct {
	Env  *Env
	Conn *Conn
	W    *Writer
	cmd  *Command
	now  int64
	// batch holds the machine commands a Batcher is to apply together when
	// the server settles the connection's batch (see Settle).
	batch deferredBatch
	// scratch is the machine's working state for this connection's applies.
	scratch machine.Scratch
	// outcome is the last machine command's, when applied is set: what a
	// door that is not RESP reads (Session.Decide).
	outcome machine.Outcome
	applied bool
	// refusal is why the door refused the last command before the apply
	// (refuse), when it said.
	refusal machine.Reason
	// captured, when set, collects every outcome settled, in order
	// (Session.DecideAll).
	captured *[]machine.Outcome
}

// Reset prepares the context for the next command.
func (c *Ctx) Reset() {
	c.now = 0
	c.cmd = nil
	c.outcome, c.applied, c.refusal = machine.Outcome{}, false, machine.ReasonNone
}

// refuse answers msg, an error the door gives a machine command before
// anything is applied, and notes why for a door that reads typed
// outcomes (Session.Decide).
func (c *Ctx) refuse(why machine.Reason, msg string) {
	c.refusal = why
	c.W.Error(msg)
}

// settled records out as the last machine command's outcome.
func (c *Ctx) settled(out machine.Outcome) {
	c.outcome, c.applied = out, true
	if c.captured != nil {
		*c.captured = append(*c.captured, out)
	}
}

// Now is the instant the command runs at, read from the clock once per
// command.
func (c *Ctx) Now() int64 {
	if c.now == 0 {
		c.now = c.Env.Clock.Now()
	}
	return c.now
}

// Command is the command (or subcommand) the last Dispatch ran, nil when it
// was refused before running; the server records it for CLIENT LIST.
func (c *Ctx) Command() *Command { return c.cmd }

// readInstant is the instant a surface read of the machine (SCAN, KEYS,
// CLUSTER GETKEYSINSLOT) judges expiry at.
func (c *Ctx) readInstant() int64 { return c.Env.Machine.ReadInstant(c.Now()) }

// Writer builds replies; it is package resp's.
type Writer = resp.Writer
