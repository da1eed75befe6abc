package rls

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A follower forwards its callers' calls to the leader in pipelines: the
// calls waiting when a pipeline starts go out together on one connection,
// in one write, and their replies come back in order. The leader reads a
// pipeline as one batch, which goes into one log entry; the follower keeps
// a few connections busy instead of one per call in flight.

// forwardPipelines is how many pipelines a follower keeps in flight to one
// node (each on a connection of its own); maxPipeline bounds the calls in
// one.
const (
	forwardPipelines = 4
	maxPipeline      = 256
)

// fwdCall is a call waiting for a pipeline.
type fwdCall struct {
	ctx context.Context
	// words are the call's, copied into buf: a caller that gives up may
	// reuse its own while a pipeline still writes them.
	words []any
	buf   []byte
	done  chan fwdResult
	// state: 0 queued, 1 taken by a pipeline, 2 given up by its caller
	// before a pipeline took it (never sent).
	state atomic.Int32
}

type fwdResult struct {
	v   any
	err error
}

// errGaveUp: a call's deadline passed while it waited for a pipeline; it
// was never sent.
var errGaveUp = notSent{errors.New("rls: the call's deadline passed before it was sent")}

// pipeliner sends the calls for one node.
type pipeliner struct {
	client  *redis.Client
	timeout time.Duration
	calls   chan *fwdCall
	stop    chan struct{}
	wg      sync.WaitGroup
	pool    sync.Pool
}

func newPipeliner(c *redis.Client, timeout time.Duration) *pipeliner {
	p := &pipeliner{client: c, timeout: timeout, calls: make(chan *fwdCall, 4*maxPipeline), stop: make(chan struct{})}
	p.pool.New = func() any { return &fwdCall{done: make(chan fwdResult, 1)} }
	p.wg.Add(forwardPipelines)
	for range forwardPipelines {
		go p.run()
	}
	return p
}

// send queues words (each a []byte) and waits for the reply (as go-redis reads it), or
// for ctx: a call its caller gave up on before it was sent is notSent;
// after, its outcome is unknown.
func (p *pipeliner) send(ctx context.Context, words []any) (any, error) {
	c := p.pool.Get().(*fwdCall)
	c.ctx = ctx
	c.buf, c.words = c.buf[:0], c.words[:0]
	for _, w := range words {
		c.buf = append(c.buf, w.([]byte)...)
	}
	at := 0
	for _, w := range words {
		n := len(w.([]byte))
		c.words = append(c.words, c.buf[at:at+n:at+n])
		at += n
	}
	c.state.Store(0)
	select {
	case p.calls <- c:
	case <-ctx.Done():
		p.pool.Put(c)
		return nil, errGaveUp
	case <-p.stop:
		p.pool.Put(c)
		return nil, notSent{redis.ErrClosed}
	}
	select {
	case r := <-c.done:
		c.ctx = nil
		p.pool.Put(c)
		return r.v, r.err
	case <-ctx.Done():
		if c.state.CompareAndSwap(0, 2) {
			return nil, errGaveUp // the pipeline will skip it (and not reuse it)
		}
		// Sent: the reply may still come; the call is not reused.
		return nil, ctx.Err()
	}
}

// run takes a call, every call waiting behind it (up to maxPipeline), and
// sends them as one pipeline.
func (p *pipeliner) run() {
	defer p.wg.Done()
	batch := make([]*fwdCall, 0, maxPipeline)
	cmds := make([]*redis.Cmd, 0, maxPipeline)
	for {
		batch = batch[:0]
		select {
		case c := <-p.calls:
			batch = append(batch, c)
		case <-p.stop:
			return
		}
	drain:
		for len(batch) < maxPipeline {
			select {
			case c := <-p.calls:
				batch = append(batch, c)
			default:
				break drain
			}
		}
		// Take the calls whose callers still wait; the pipeline lives as
		// long as the latest of their deadlines (the forward timeout at
		// most).
		live := batch[:0]
		deadline := time.Now().Add(p.timeout)
		latest := time.Time{}
		for _, c := range batch {
			if !c.state.CompareAndSwap(0, 1) {
				continue
			}
			live = append(live, c)
			if d, ok := c.ctx.Deadline(); ok && d.After(latest) {
				latest = d
			}
		}
		if len(live) == 0 {
			continue
		}
		if !latest.IsZero() && latest.Before(deadline) {
			deadline = latest
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		cmds = cmds[:0]
		_, err := p.client.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for _, c := range live {
				cmds = append(cmds, pl.Do(ctx, c.words...))
			}
			return nil
		})
		cancel()
		_ = err // each command carries its own error
		for i, c := range live {
			v, cerr := cmds[i].Result()
			c.done <- fwdResult{v: v, err: cerr}
		}
		clear(cmds)
	}
}

// close stops the pipelines and closes the connections.
func (p *pipeliner) close() error {
	close(p.stop)
	p.wg.Wait()
	return p.client.Close()
}
