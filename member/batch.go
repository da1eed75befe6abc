package member

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/memberpb"
)

// A follower forwards its callers' calls to the leader in batches: the
// calls waiting when a batch starts go out together in one message (up to
// maxBatch), a few batches in flight to one member; the leader runs a
// batch as a RESP connection's pipeline, one group in the log. One gRPC
// call then carries many decisions, and the leader waits once for them.
//
// How many batches fly at once adapts to the load. Up to steadyInFlight
// go out as soon as they have a call: with few callers nothing waits.
// Beyond that (up to batchesInFlight), a new batch lingers to gather
// calls — until one in flight is answered, lingerFill calls wait, or a
// quarter of a batch's recent round trip has passed — so that under load
// a few large batches fly instead of many small ones: each gRPC call
// costs both members CPU whatever it carries (issue #57: at 50 callers,
// 16 unbounded batches averaged ~3 calls each). Measured through a
// follower (bench_cluster_cpu.sh, 5 alternating rounds): at 50 callers
// the group's CPU per decision 141 µs against 178, 8.5k calls/s against
// 7.2k; at 10 callers no change (3.24k calls/s, p50 2.9 ms, both).
const (
	maxBatch        = 256
	batchesInFlight = 16
	steadyInFlight  = 2
	lingerFill      = 32
	// maxLinger bounds a linger whatever the round trips were.
	maxLinger = 2 * time.Millisecond
	// batchTimeout bounds a batch whose calls set no deadline.
	batchTimeout = 5 * time.Second
)

// decideCall is a call waiting for a batch.
type decideCall struct {
	ctx     context.Context
	command [][]byte
	done    chan decideResult
	// state: 0 queued, 1 taken by a batch, 2 given up by its caller
	// before a batch took it (never sent).
	state atomic.Int32
}

type decideResult struct {
	out machine.Outcome
	err error
}

// batcher sends the calls for one member.
type batcher struct {
	c     *Client
	to    Addr
	calls chan *decideCall
	slots chan struct{}
	// answered is signalled when a batch in flight is answered (a
	// lingering batch goes then).
	answered chan struct{}
	// rtt is a moving average of the batches' round trips, in ns.
	rtt  atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func newBatcher(c *Client, to Addr) *batcher {
	b := &batcher{c: c, to: to, calls: make(chan *decideCall, 4*maxBatch), slots: make(chan struct{}, batchesInFlight),
		answered: make(chan struct{}, 1), stop: make(chan struct{})}
	b.wg.Add(1)
	go b.loop()
	return b
}

func (b *batcher) loop() {
	defer b.wg.Done()
	for {
		select {
		case b.slots <- struct{}{}:
		case <-b.stop:
			return
		}
		var first *decideCall
		select {
		case first = <-b.calls:
		case <-b.stop:
			return
		}
		batch := []*decideCall{first}
	more:
		for len(batch) < maxBatch {
			select {
			case call := <-b.calls:
				batch = append(batch, call)
			default:
				break more
			}
		}
		if len(b.slots) > steadyInFlight && len(batch) < lingerFill {
			batch = b.linger(batch)
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer b.done()
			start := time.Now()
			b.send(batch)
			b.noteRoundTrip(time.Since(start))
		}()
	}
}

// done frees a batch's slot and wakes a lingering batch.
func (b *batcher) done() {
	<-b.slots
	select {
	case b.answered <- struct{}{}:
	default:
	}
}

// linger gathers more calls into batch while steadyInFlight batches or
// more are in flight: until one of them is answered, lingerFill calls
// wait, or a quarter of the recent round trip has passed.
func (b *batcher) linger(batch []*decideCall) []*decideCall {
	select {
	case <-b.answered: // a stale signal: an answer before this batch began
	default:
	}
	wait := min(time.Duration(b.rtt.Load())/4, maxLinger)
	if wait <= 0 {
		return batch
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for len(batch) < lingerFill {
		select {
		case call := <-b.calls:
			batch = append(batch, call)
		case <-b.answered:
			return batch
		case <-timer.C:
			return batch
		case <-b.stop:
			return batch
		}
	}
	return batch
}

// noteRoundTrip adds a batch's round trip to the moving average (1/8 of
// the new one).
func (b *batcher) noteRoundTrip(d time.Duration) {
	old := b.rtt.Load()
	if old == 0 {
		b.rtt.Store(int64(d))
		return
	}
	b.rtt.Store(old + (int64(d)-old)/8)
}

// send sends the calls of batch still wanted, and hands each its answer.
func (b *batcher) send(batch []*decideCall) {
	taken := batch[:0]
	deadline := time.Now().Add(batchTimeout)
	for _, call := range batch {
		if !call.state.CompareAndSwap(0, 1) {
			continue // its caller gave up: never sent
		}
		if d, ok := call.ctx.Deadline(); ok && (len(taken) == 0 || d.After(deadline)) {
			deadline = d
		}
		taken = append(taken, call)
	}
	if len(taken) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	fail := func(err error) {
		for _, call := range taken {
			call.done <- decideResult{err: err}
		}
	}
	cc, err := b.c.conn(b.to)
	if err != nil {
		fail(err)
		return
	}
	if err := ready(ctx, cc); err != nil {
		fail(fmt.Errorf("%w: %s: %w", ErrUnreachable, b.to.Port, err))
		return
	}
	req := &memberpb.DecideBatchRequest{Group: b.to.Group, Calls: make([]*memberpb.Words, len(taken))}
	for i, call := range taken {
		req.Calls[i] = &memberpb.Words{Words: call.command}
	}
	out, err := memberpb.NewMemberClient(cc).DecideBatch(ctx, req)
	if err != nil {
		fail(callError(b.to, err))
		return
	}
	if err := errOf(out.GetCode()); err != nil {
		if out.GetCode() == memberpb.Code_NOT_LEADER {
			err = &NotLeaderError{Leader: out.GetLeader(), Detail: out.GetDetail()}
		} else {
			err = fmt.Errorf("%w (%s)", err, out.GetDetail())
		}
		fail(err)
		return
	}
	if len(out.GetReplies()) != len(taken) {
		fail(fmt.Errorf("%w: %d answers for %d calls", ErrUnknownOutcome, len(out.GetReplies()), len(taken)))
		return
	}
	for i, call := range taken {
		call.done <- decideResultOf(out.GetReplies()[i])
	}
}

// decideResultOf is one call's answer in a batch.
func decideResultOf(r *memberpb.DecideReply) decideResult {
	switch code := r.GetCode(); {
	case code == memberpb.Code_NOT_LEADER:
		return decideResult{err: &NotLeaderError{Leader: r.GetLeader(), Detail: r.GetDetail()}}
	case errOf(code) != nil:
		return decideResult{err: fmt.Errorf("%w (%s)", errOf(code), r.GetDetail())}
	}
	out := machine.Outcome{Err: r.GetError(), Reason: reasonOf(r.GetReason()), Refusal: redirectOf(r), Limited: r.GetLimited(),
		Statuses: statusesOf(r.GetStatuses())}
	if out.Reason == machine.ReasonNone && out.Refusal != nil {
		// A member that does not say why (an older one) still says, typed,
		// that nothing was applied.
		out.Reason = machine.ReasonNotNow
	}
	if l := r.GetLease(); l != nil {
		out.Lease = machine.LeaseResult{Granted: l.GetGranted(), TTL: l.GetTtlNs(), Refresh: l.GetRefreshNs(), Unlimited: l.GetUnlimited(), Denied: l.GetDenied(), Grant: l.GetGrantId()}
		out.Leased = true
	}
	if sh := r.GetShare(); sh != nil {
		out.Share = machine.ShareResult{Burst: sh.GetBurst(), PerFill: sh.GetPerFill(), Every: sh.GetEveryS(), TTL: sh.GetTtlNs(), Gen: sh.GetGen(),
			Unlimited: sh.GetUnlimited(), Denied: sh.GetDenied()}
		out.Shared = true
	}
	return decideResult{out: out}
}

// close stops the loop, waits for the batches in flight, and answers the
// calls still queued: never sent.
func (b *batcher) close() {
	close(b.stop)
	b.wg.Wait()
	for {
		select {
		case call := <-b.calls:
			if call.state.CompareAndSwap(0, 2) {
				call.done <- decideResult{err: errGaveUp}
			}
		default:
			return
		}
	}
}

// errGaveUp: a call's deadline passed while it waited for a batch; it was
// never sent.
var errGaveUp = fmt.Errorf("%w: the call's deadline passed before it was sent", ErrUnreachable)

// Decide asks the member at to, its group's leader, to run a client's
// RL.SHOULDRATELIMIT, in a batch with the other calls waiting for it: its
// outcome, or an error wrapping the package's sentinels (ErrUnreachable
// and ErrNotLeader: nothing was logged).
func (c *Client) Decide(ctx context.Context, to Addr, command [][]byte) (machine.Outcome, error) {
	b := c.batcherFor(to)
	call := &decideCall{ctx: ctx, command: command, done: make(chan decideResult, 1)}
	select {
	case b.calls <- call:
	case <-ctx.Done():
		return machine.Outcome{}, errGaveUp
	}
	select {
	case r := <-call.done:
		return r.out, r.err
	case <-ctx.Done():
		if call.state.CompareAndSwap(0, 2) {
			return machine.Outcome{}, errGaveUp
		}
		// Sent: its answer decides (the batch's deadline is at least
		// this call's).
		r := <-call.done
		return r.out, r.err
	}
}

// batcherFor is the batcher for to, made on first use.
func (c *Client) batcherFor(to Addr) *batcher {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.touch(to)
	if b := c.batchers[to]; b != nil {
		return b
	}
	b := newBatcher(c, to)
	c.batchers[to] = b
	return b
}
