package httplimit

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// inProcess is what the limits that decide in process (Leases, Shares)
// have alike: the rules, this process's name to sluice, the clock, and per
// descriptor what it holds (H), bounded by maxLeases.
type inProcess[H any] struct {
	rules  Rules
	holder string
	now    func() time.Time

	mu     sync.Mutex
	client Doer
	held   map[string]*H
	closed bool
	wg     sync.WaitGroup
}

// init readies p: holder empty is the host name, the process id and a
// random number; now nil is time.Now.
func (p *inProcess[H]) init(rules Rules, holder string, now func() time.Time) error {
	if holder == "" {
		host, _ := os.Hostname()
		holder = host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(rand.Uint64()%1e6, 10)
	}
	if len(holder) > 128 {
		return fmt.Errorf("%w: a holder is at most 128 bytes", ErrInvalidLimit)
	}
	if now == nil {
		now = time.Now
	}
	p.rules, p.holder, p.now, p.held = rules, holder, now, map[string]*H{}
	return nil
}

// enter is what p holds for r's one descriptor — made by fresh the first
// time — with p.mu held, the request's units and the instant; nil (p.mu
// not held) when r is decided per request: not one descriptor, p closed,
// or no room left after forget dropped what it could.
func (p *inProcess[H]) enter(c Doer, r *http.Request, key string, forget func(now time.Time) bool,
	fresh func(desc []any, now time.Time) *H) (h *H, units int64, now time.Time) {
	descs := p.rules.Descriptors(r, key)
	if len(descs) != 1 || len(descs[0]) == 0 {
		return nil, 0, time.Time{}
	}
	name := descriptorName(descs[0])
	units, now = cost(p.rules.Cost), p.now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, 0, now
	}
	p.client = c
	if h = p.held[name]; h == nil {
		if len(p.held) >= maxLeases && !forget(now) {
			p.mu.Unlock()
			return nil, 0, now
		}
		args, _ := appendDescriptors(nil, descs)
		h = fresh(args, now)
		p.held[name] = h
	}
	return h, units, now
}
