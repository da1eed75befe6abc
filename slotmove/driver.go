// Package slotmove moves hash slots between the groups of a running
// sharded cluster (CLUSTER MIGRATESLOTS), whole chunks at a time, so that a
// counter is never live in two groups and never lost.
//
// A job is replicated state of the source group (machine.Job, with the
// slots the group owns). The leader of the source group drives it, chunk
// by chunk; each chunk changes group at two points, one in each log
// (machine/slotmove.go):
//
//  1. the cut, in the source's log: the source stops owning the chunk at
//     a new epoch and the job marks the chunk pending. Clients of the chunk
//     get TRYAGAIN from here.
//  2. the import, in the target's log: the chunk's records (read from the
//     source after the cut, so final) with their digest, and ownership at
//     that epoch, in one apply. Clients get MOVED to the target from here.
//
// then the source logs the chunk done and drops its records. Every step is
// idempotent and read back from the replicated job, so a new source leader
// (or a restarted one) finds a pending chunk and finishes it: the import
// either applied (a repeat is a no-op) or did not (it applies now). An
// import a target has passed (an older epoch) is refused, never applied
// late, and the source cuts the chunk again at a higher epoch. A cancelled
// job cuts no further chunk; one already cut completes.
package slotmove

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/member"
	"github.com/sluice-rl/sluice/shardmap"
	"github.com/sluice-rl/sluice/slot"
)

// errHeld: the driver holds after a step (HoldAfter).
var errHeld = errors.New("slotmove: held")

// Errors.
var (
	// ErrRefused: CLUSTER MIGRATESLOTS asked for something that cannot
	// start (its text says what); no job started.
	ErrRefused = errors.New("slotmove: refused")
	// ErrNotLeader: jobs start and are cancelled at the source group's
	// leader.
	ErrNotLeader = errors.New("slotmove: this member does not lead its group")
	// ErrNotFenced: the group has not logged its slots yet (a moment after
	// it starts).
	ErrNotFenced = errors.New("slotmove: the group has not logged its slots yet")
)

// Config is a member's driver of migrations.
type Config struct {
	// Router is the member's routing (groups, members, live ownership).
	Router *shardmap.Router
	// Machine is the member's state machine (the jobs, the records).
	Machine *machine.Machine
	// Apply logs one command in this member's group; it fails unless this
	// member leads, or when the command answered an error (a
	// *machine.ReplyError).
	Apply func(args [][]byte) error
	// Serving reports whether this member leads its group.
	Serving func() bool
	// PlaceGroup sends a placement request (an import, a configuration
	// copy, a digest asked) to group g's leader on its member port;
	// PlaceMember to the member at addr. Their errors are member's
	// sentinels, or the applied request's (*machine.StaleEpochError,
	// *machine.ReplyError).
	PlaceGroup  func(ctx context.Context, g int, req *machine.PlacementRequest) (machine.PlacementResult, error)
	PlaceMember func(ctx context.Context, addr string, req *machine.PlacementRequest) (machine.PlacementResult, error)
	// ReportOf asks group g's leader what it knows of its group (its
	// epoch, its slots) on the member port.
	ReportOf func(ctx context.Context, g int) (member.Report, error)
	// Propagate applies a command this group applied in every other group
	// but the one named skip (group changes); nil: none.
	Propagate func(ctx context.Context, args [][]byte, skip string) error
	// NodeID is this member's node id (a job's source_node).
	NodeID string
	// ChunkSlots and ChunkKeys bound a chunk: at most ChunkSlots slots,
	// and no more slots once ChunkKeys records are in it (a chunk has at
	// least one slot). Smaller chunks keep each TRYAGAIN window short.
	// Defaults 64 and 1000.
	ChunkSlots, ChunkKeys int
	// Timeout bounds one call to the target (default 5 s).
	Timeout time.Duration
	// Settle is how long a new job waits before its first cut, and how
	// long an ended job's slots are still shown as this group's in
	// CLUSTER NODES: the time every member takes to learn a job started
	// or ended (default shardmap.JobViewSettle; negative: none, for unit
	// tests).
	Settle time.Duration
	// Now is the wall clock (default time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.Router == nil || c.Machine == nil || c.Apply == nil || c.Serving == nil || c.PlaceGroup == nil || c.ReportOf == nil {
		return errors.New("slotmove: Router, Machine, Apply, Serving, PlaceGroup and ReportOf are required")
	}
	if c.ChunkSlots == 0 {
		c.ChunkSlots = 64
	}
	if c.ChunkKeys == 0 {
		c.ChunkKeys = 1000
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Settle == 0 {
		c.Settle = shardmap.JobViewSettle
	}
	c.Settle = max(c.Settle, 0)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.ChunkSlots < 1 || c.ChunkKeys < 1 || c.Timeout < 0 {
		return errors.New("slotmove: ChunkSlots, ChunkKeys and Timeout must be positive")
	}
	return nil
}

// Driver drives the jobs of its member's group while the member leads.
type Driver struct {
	cfg  Config
	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
	// cutAt is when the driver cut the pending chunk of job cutJob (only
	// the driver goroutine touches them): the start of its cut-over.
	cutAt  time.Time
	cutJob string
	stats  counters
	// hold, set by a test (DEBUG SLOTMOVE-HOLD), stops every job after a
	// step — "cut" or "import" — so a fault can be injected exactly there.
	hold atomic.Pointer[string]
	// seen is when the driver first saw each running job with nothing
	// cut yet (only the driver goroutine touches it): its first cut waits
	// Settle from then.
	seen map[string]time.Time
}

// HoldAfter makes the driver stop every job after step ("cut": the chunk
// cut, not yet sent; "import": the target took it, not yet confirmed here)
// until called again with "" (or "none"). A test hook.
func (d *Driver) HoldAfter(step string) error {
	switch step {
	case "none":
		step = ""
	case "", "cut", "import":
	default:
		return fmt.Errorf("%w: hold after cut, import or none", ErrRefused)
	}
	d.hold.Store(&step)
	return nil
}

// held reports whether the driver holds after step.
func (d *Driver) held(step string) bool {
	h := d.hold.Load()
	return h != nil && *h == step
}

// counters are the driver's, read by Stats.
type counters struct {
	chunks, keys, bytes atomic.Int64
	cutover             [len(CutoverBounds) + 1]atomic.Int64
	cutoverNanos        atomic.Int64
}

// CutoverBounds are the upper bounds of the cut-over histogram's buckets
// (the last bucket: the rest), fine around the tens of milliseconds a
// cut-over takes so its percentiles read to a few ms.
var CutoverBounds = [...]time.Duration{
	time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond, 5 * time.Millisecond,
	6 * time.Millisecond, 8 * time.Millisecond, 10 * time.Millisecond, 12 * time.Millisecond, 15 * time.Millisecond,
	20 * time.Millisecond, 25 * time.Millisecond, 30 * time.Millisecond, 40 * time.Millisecond, 50 * time.Millisecond,
	75 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second,
	5 * time.Second,
}

// Stats are what this member's driver moved since it started.
type Stats struct {
	// Chunks, Keys and Bytes count the chunks confirmed moved.
	Chunks, Keys, Bytes int64
	// Cutover counts chunks by how long their slots answered TRYAGAIN
	// (from before the cut was logged to the redirect to the target), per
	// bucket of CutoverBounds (not cumulative; the last: longer);
	// CutoverNanos is their total. A chunk resumed by a new leader is not
	// counted.
	Cutover      [len(CutoverBounds) + 1]int64
	CutoverNanos int64
}

// Stats reads the driver's counters.
func (d *Driver) Stats() Stats {
	st := Stats{Chunks: d.stats.chunks.Load(), Keys: d.stats.keys.Load(), Bytes: d.stats.bytes.Load(),
		CutoverNanos: d.stats.cutoverNanos.Load()}
	for i := range st.Cutover {
		st.Cutover[i] = d.stats.cutover[i].Load()
	}
	return st
}

// New starts a driver.
func New(cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, wake: make(chan struct{}, 1), stop: make(chan struct{}), seen: map[string]time.Time{}}
	d.wg.Add(1)
	go d.run()
	return d, nil
}

// Close stops the driver (jobs stay where they are; the next leader
// resumes them).
func (d *Driver) Close() {
	close(d.stop)
	d.wg.Wait()
}

// Wake makes the driver look at its jobs now.
func (d *Driver) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Jobs are the group's migration jobs, oldest first.
func (d *Driver) Jobs() []machine.Job {
	if o := d.cfg.Machine.Owned(); o != nil {
		return o.Jobs
	}
	return nil
}

func (d *Driver) run() {
	defer d.wg.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-d.wake:
		case <-tick.C:
		}
		for d.cfg.Serving() && d.step() {
			select {
			case <-d.stop:
				return
			default:
			}
		}
	}
}

// step advances the first running job by one step; it reports whether it
// made progress (so the next step follows at once).
func (d *Driver) step() bool {
	o := d.cfg.Machine.Owned()
	if o == nil {
		return false
	}
	for _, j := range o.Jobs {
		if j.State != machine.JobRunning {
			delete(d.seen, j.ID)
			continue
		}
		var err error
		switch {
		case j.Pending != nil && d.held("cut"):
			continue
		case j.Pending != nil:
			err = d.finish(&j)
		case j.Cancel:
			continue // ends when its last chunk is confirmed
		case !d.settled(&j):
			continue
		default:
			err = d.cut(o, &j)
		}
		if errors.Is(err, errHeld) {
			return false
		}
		if err != nil {
			d.cfg.Log.Warn("slot migration step failed; retrying", "job", j.ID, "err", err)
			return false
		}
		return true
	}
	return false
}

// settled reports whether job j may cut: it has cut before, or Settle
// passed since the driver first saw it, so every member shows its slots
// as this group's before the first chunk leaves (shardmap.JobView).
func (d *Driver) settled(j *machine.Job) bool {
	if len(j.Done) > 0 || d.cfg.Settle == 0 {
		delete(d.seen, j.ID)
		return true
	}
	first, ok := d.seen[j.ID]
	if !ok {
		first = d.cfg.Now()
		d.seen[j.ID] = first
	}
	if d.cfg.Now().Sub(first) < d.cfg.Settle {
		return false
	}
	delete(d.seen, j.ID)
	return true
}

// showUntil is the instant (Unix ms) until which a job ending now is still
// shown as before: every member learns of the end by then.
func (d *Driver) showUntil() string {
	return strconv.FormatInt(d.cfg.Now().Add(d.cfg.Settle).UnixMilli(), 10)
}

// cut cuts the job's next chunk.
func (d *Driver) cut(o *machine.Ownership, j *machine.Job) error {
	g, ok := d.cfg.Router.GroupIndex(j.TargetGroup)
	if !ok {
		return d.end(j, machine.JobFailed, "the target group "+j.TargetGroup+" is not in the cluster map")
	}
	chunk := d.chunk(j.Remaining())
	if len(chunk) == 0 {
		return d.end(j, machine.JobSuccess, "")
	}
	epoch := max(o.Epoch, d.targetEpoch(g)) + 1
	d.cutAt, d.cutJob = time.Now(), j.ID
	return d.apply("SLUICE.CUT", j.ID, strconv.FormatUint(epoch, 10), chunk)
}

// chunk picks the next chunk of remaining: whole slots from the first,
// within ChunkSlots and ChunkKeys.
func (d *Driver) chunk(remaining [][2]int) [][2]int {
	if len(remaining) == 0 {
		return nil
	}
	keys := d.cfg.Machine.Keys()
	now := d.cfg.Machine.Applied()
	from := remaining[0][0]
	to := from
	n := keys.CountInSlot(from, now)
	for to < remaining[0][1] && to-from+1 < d.cfg.ChunkSlots && n < d.cfg.ChunkKeys {
		c := keys.CountInSlot(to+1, now)
		if n+c > d.cfg.ChunkKeys {
			break
		}
		to++
		n += c
	}
	return [][2]int{{from, to}}
}

// targetEpoch is group g's epoch as its leader reports it (0 if unknown:
// an import below it is refused, and the chunk is cut again above it).
func (d *Driver) targetEpoch(g int) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Timeout)
	defer cancel()
	rep, err := d.cfg.ReportOf(ctx, g)
	if err != nil || !rep.Fenced {
		return 0
	}
	return rep.Slots.Epoch
}

// finish sends the pending chunk to the target and confirms it.
func (d *Driver) finish(j *machine.Job) error {
	g, ok := d.cfg.Router.GroupIndex(j.TargetGroup)
	if !ok {
		return fmt.Errorf("the target group %s is not in the cluster map", j.TargetGroup)
	}
	exp, err := d.cfg.Machine.ExportSlots(j.Pending)
	if err != nil {
		return err
	}
	req := &machine.PlacementRequest{Kind: machine.PlaceImport, Epoch: j.PendingEpoch, Digest: exp.Digest, Payload: exp.Payload,
		Ranges: j.Pending}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Timeout)
	defer cancel()
	_, err = d.cfg.PlaceGroup(ctx, g, req)
	if err != nil && d.cfg.PlaceMember != nil {
		// A leader changed since the probe: follow its redirect once.
		if addr, ok := member.LeaderOf(err); ok {
			_, err = d.cfg.PlaceMember(ctx, addr, req)
		}
	}
	var stale *machine.StaleEpochError
	if errors.As(err, &stale) {
		// The target is past this epoch: cut the chunk again above it.
		o := d.cfg.Machine.Owned()
		return d.apply("SLUICE.CUT", j.ID, strconv.FormatUint(max(stale.Epoch, o.Epoch)+1, 10), j.Pending)
	}
	if err != nil {
		return err
	}
	if d.held("import") {
		return errHeld
	}
	// The target owns the chunk: send its clients there at once, then
	// confirm the chunk in this group's log.
	d.cfg.Router.Moved(g, j.PendingEpoch, j.Pending)
	if d.cutJob == j.ID {
		took := time.Since(d.cutAt)
		b := 0
		for b < len(CutoverBounds) && took > CutoverBounds[b] {
			b++
		}
		d.stats.cutover[b].Add(1)
		d.stats.cutoverNanos.Add(int64(took))
		d.cutJob = ""
	}
	if err := d.apply("SLUICE.MOVED", j.ID, strconv.Itoa(exp.Keys), strconv.Itoa(len(exp.Payload)), d.showUntil()); err != nil {
		return err
	}
	d.stats.chunks.Add(1)
	d.stats.keys.Add(int64(exp.Keys))
	d.stats.bytes.Add(int64(len(exp.Payload)))
	if o := d.cfg.Machine.Owned(); o != nil {
		d.cfg.Router.Claim(d.cfg.Router.Self(), o.Epoch, o.Ranges)
	}
	return nil
}

// end ends a job.
func (d *Driver) end(j *machine.Job, state, msg string) error {
	args := []any{"SLUICE.JOB", "END", j.ID, state, d.showUntil()}
	if msg != "" {
		args = append(args, msg)
	}
	return d.apply(args...)
}

// apply logs a command (words: strings, or [][2]int ranges spread as
// from-to words).
func (d *Driver) apply(words ...any) error {
	var args [][]byte
	for _, w := range words {
		switch v := w.(type) {
		case string:
			args = append(args, []byte(v))
		case [][2]int:
			for _, r := range v {
				args = append(args, []byte(rangeArg(r)))
			}
		}
	}
	if err := d.cfg.Apply(args); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	return nil
}

func rangeArg(r [2]int) string { return strconv.Itoa(r[0]) + "-" + strconv.Itoa(r[1]) }

// Spec is one SLUICE MIGRATESLOTS block: ranges to the group of node.
type Spec struct {
	Ranges [][2]int
	// Node is a node id of a member of the target group.
	Node string
}

// Migrate starts one job per spec, all or none: every range must be this
// group's, none already migrating, every node a member of another group.
func (d *Driver) Migrate(specs []Spec) error {
	if !d.cfg.Serving() {
		return ErrNotLeader
	}
	o := d.cfg.Machine.Owned()
	if o == nil {
		return ErrNotFenced
	}
	var seen [slot.Count]bool
	var cmds [][]any
	var targets []int
	for _, sp := range specs {
		g, ok := d.groupOfNode(sp.Node)
		if !ok {
			return fmt.Errorf("%w: unknown node %s", ErrRefused, sp.Node)
		}
		if g == d.cfg.Router.Self() {
			return fmt.Errorf("%w: node %s is in this group", ErrRefused, sp.Node)
		}
		for _, r := range sp.Ranges {
			for s := r[0]; s <= r[1]; s++ {
				if seen[s] {
					return fmt.Errorf("%w: slot %d is named twice", ErrRefused, s)
				}
				seen[s] = true
				if !o.Owns(s) {
					return fmt.Errorf("%w: slot %d is not this group's", ErrRefused, s)
				}
			}
		}
		for _, j := range o.Jobs {
			if j.State != machine.JobRunning {
				continue
			}
			for _, r := range j.Remaining() {
				for s := r[0]; s <= r[1]; s++ {
					if seen[s] {
						return fmt.Errorf("%w: slot %d is already migrating", ErrRefused, s)
					}
				}
			}
		}
		cmds = append(cmds, []any{"SLUICE.JOB", "ADD", machine.NewJobID(), d.cfg.Router.Map().Groups[g].ID,
			d.cfg.NodeID, sp.Node, sp.Ranges})
		targets = append(targets, g)
	}
	for _, g := range slices.Compact(slices.Sorted(slices.Values(targets))) {
		if err := d.sameConfig(g); err != nil {
			return err
		}
	}
	for _, c := range cmds {
		if err := d.apply(c...); err != nil {
			return err
		}
	}
	d.Wake()
	return nil
}

// sameConfig makes target group g decide by this group's configuration
// before slots move to it (a group added later has only its own --rules
// files; one that missed an override is behind): when its configuration
// differs — rules, overrides, scales; a member of 0.4.0 says only its
// rules' digest — it is given this group's (SLUICE.CONFIG); one whose
// configuration still differs refuses the migration, naming both digests.
func (d *Driver) sameConfig(g int) error {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Timeout)
	defer cancel()
	id := d.cfg.Router.Map().Groups[g].ID
	mine, err := d.cfg.Machine.ConfigDigest()
	if err != nil {
		return err
	}
	rules := d.cfg.Machine.RulesDigest("")
	same := func(theirs machine.PlacementResult) bool {
		if theirs.Config != "" {
			return theirs.Config == mine
		}
		return theirs.Digest == rules
	}
	// A group just added may not have a leader known here yet: ask
	// again until the timeout.
	theirs, err := d.digestsOf(ctx, g)
	for err != nil && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
			theirs, err = d.digestsOf(ctx, g)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: group %s's configuration could not be read: %w", ErrRefused, id, err)
	}
	if same(theirs) {
		return nil
	}
	exp, err := d.cfg.Machine.ExportConfig()
	if err != nil {
		return err
	}
	if _, err := d.cfg.PlaceGroup(ctx, g, &machine.PlacementRequest{Kind: machine.PlaceConfig, Digest: exp.Digest, Payload: exp.Payload}); err != nil {
		return fmt.Errorf("%w: group %s decides by another configuration (rules %s) than this group (rules %s), and did not take this group's: %w",
			ErrRefused, id, theirs.Digest, rules, err)
	}
	if theirs, err = d.digestsOf(ctx, g); err != nil || !same(theirs) {
		return fmt.Errorf("%w: group %s decides by another configuration (rules %s) than this group (rules %s): load the same rules there",
			ErrRefused, id, theirs.Digest, rules)
	}
	d.cfg.Log.Info("gave a migration's target group this group's configuration", "group", id, "rules", rules, "config", mine)
	return nil
}

// digestsOf is what group g's leader says of its configuration's digests
// (a placement request of PlaceDigest).
func (d *Driver) digestsOf(ctx context.Context, g int) (machine.PlacementResult, error) {
	return d.cfg.PlaceGroup(ctx, g, &machine.PlacementRequest{Kind: machine.PlaceDigest})
}

// Cancel cancels the running jobs; it returns how many were running.
func (d *Driver) Cancel() (int, error) {
	if !d.cfg.Serving() {
		return 0, ErrNotLeader
	}
	n := 0
	for _, j := range d.Jobs() {
		if j.State == machine.JobRunning && !j.Cancel {
			n++
		}
	}
	if err := d.apply("SLUICE.JOB", "CANCEL", d.showUntil()); err != nil {
		return 0, err
	}
	return n, nil
}

// groupOfNode is the group of the member whose node id is id.
func (d *Driver) groupOfNode(id string) (int, bool) {
	m := d.cfg.Router.Map()
	for g := range m.Groups {
		if m.Groups[g].Removed {
			continue
		}
		for _, p := range m.Groups[g].Members {
			if strings.EqualFold(cluster.MemberNodeID(p.ID, p.RaftAddr), id) || p.ID == id {
				return g, true
			}
		}
	}
	return -1, false
}
