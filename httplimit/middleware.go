package httplimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
)

// Middleware limits the requests of the handlers it wraps. It is safe for
// concurrent use; wrap any number of handlers with one Middleware to share
// its breaker.
type Middleware struct {
	cfg     Config
	rand    func(n int64) int64
	breaker *gobreaker.CircuitBreaker[Decision]
	metrics *metrics // nil without Config.Metrics
}

// Reasons a request could not be decided, besides the client's errors.
var (
	// ErrTimeout is a sluice call that did not answer within Config.Timeout.
	ErrTimeout = errors.New("httplimit: sluice did not answer in time")
	// ErrBreakerOpen is a call the open (or probing) breaker did not send.
	ErrBreakerOpen = errors.New("httplimit: circuit breaker is open")
	// ErrClientGone is a request whose client went away while sluice was
	// asked; it neither counts against sluice nor gets an answer.
	ErrClientGone = errors.New("httplimit: request canceled")
)

// New validates cfg and returns the middleware.
func New(cfg Config) (*Middleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m := &Middleware{cfg: cfg, rand: cfg.Rand}
	if m.rand == nil {
		m.rand = rand.Int64N
	}
	if cfg.Metrics != nil {
		var err error
		if m.metrics, err = newMetrics(cfg.Metrics, cfg.Name); err != nil {
			return nil, err
		}
	}
	m.breaker = gobreaker.NewCircuitBreaker[Decision](gobreaker.Settings{
		Name:        cfg.Name,
		MaxRequests: cfg.Breaker.Probes,
		Timeout:     cfg.Breaker.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= cfg.Breaker.Failures
		},
		IsSuccessful:  answered,
		IsExcluded:    func(err error) bool { return errors.Is(err, ErrClientGone) },
		OnStateChange: m.stateChanged,
	})
	return m, nil
}

// Handler wraps next: each request is decided by sluice before next runs.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := m.cfg.Key(r)
		if key == "" {
			next.ServeHTTP(w, r)
			return
		}
		d, err := m.decide(r, key)
		if err != nil {
			m.fail(w, r, next, err)
			return
		}
		setRateLimitHeaders(w.Header(), m.cfg, d)
		if d.Limited {
			m.metrics.decided("limited")
			m.refuse(w, d)
			return
		}
		m.metrics.decided("allowed")
		rel, ok := m.cfg.Limit.(Releaser)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		var cell *costCell
		if _, reserve := rel.(Reserve); reserve {
			r, cell = withCostCell(r) // for ReportCost
		}
		panicked := true
		// Deferred, so a panicking handler gives its slot back too (and a
		// reservation is cancelled).
		defer func() {
			if cell != nil {
				d.outcome = handlerOutcome{cost: cell.cost.Load(), panicked: panicked}
			}
			m.release(r, rel, key, d)
		}()
		next.ServeHTTP(w, r)
		panicked = false
	})
}

// BreakerState is "closed", "half-open" or "open".
func (m *Middleware) BreakerState() string { return m.breaker.State().String() }

// decide asks sluice through the breaker, bounded by the timeout.
func (m *Middleware) decide(r *http.Request, key string) (Decision, error) {
	var orphan func(Decision)
	if rel, ok := m.cfg.Limit.(Releaser); ok {
		// A lease granted after we stopped waiting would hold a slot until
		// it expires: give it back as soon as the late answer arrives.
		orphan = func(d Decision) {
			if !d.Limited { // a refusal holds nothing
				m.releaseWithin(context.Background(), rel, key, d)
			}
		}
	}
	start := time.Now()
	d, err := m.breaker.Execute(func() (Decision, error) {
		return within(r.Context(), m.cfg.Timeout, orphan, func(ctx context.Context) (Decision, error) {
			return m.cfg.Limit.Check(ctx, m.cfg.Client, r, key)
		})
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return d, fmt.Errorf("%w: %w", ErrBreakerOpen, err)
	}
	m.metrics.observe(time.Since(start))
	return d, err
}

// within runs f with a deadline and returns when f does or the deadline
// passes, whichever is first: go-redis only honours a context deadline when
// the client enables it, and the middleware must not wait longer on a
// client configured otherwise. A late answer goes to orphan (when set) once
// f returns.
func within(parent context.Context, timeout time.Duration, orphan func(Decision), f func(context.Context) (Decision, error)) (Decision, error) {
	// Canceled only once within returns: f finishing must never make the
	// deadline look passed while its result waits in done.
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	type result struct {
		d   Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := f(ctx)
		done <- result{d, err}
	}()
	select {
	case res := <-done:
		return res.d, res.err
	case <-ctx.Done():
		select {
		case res := <-done: // answered just as the deadline passed
			return res.d, res.err
		default:
		}
		if orphan != nil {
			go func() {
				if res := <-done; res.err == nil {
					orphan(res.d)
				}
			}()
		}
		if err := parent.Err(); err != nil {
			return Decision{}, fmt.Errorf("%w: %w", ErrClientGone, err)
		}
		return Decision{}, ErrTimeout
	}
}

// answered tells the breaker whether sluice answered: an error reply
// (WRONGTYPE, a refused argument) or an unexpected reply shows it is up.
func answered(err error) bool {
	var reply redis.Error
	return err == nil || errors.As(err, &reply) || errors.Is(err, ErrBadReply)
}

// fail answers a request sluice could not decide, as configured.
func (m *Middleware) fail(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	m.metrics.failed("check", reason(err))
	if m.cfg.OnError != nil {
		m.cfg.OnError(r, err)
	}
	if errors.Is(err, ErrClientGone) {
		return
	}
	if m.cfg.OnFailure == FailOpen {
		m.metrics.decided("failed_open")
		next.ServeHTTP(w, r)
		return
	}
	m.metrics.decided("failed_closed")
	status := m.cfg.FailClosedStatus
	writeProblem(w, problem{
		Type:       "about:blank",
		Title:      http.StatusText(status),
		Status:     status,
		Detail:     "the rate limiter is unavailable",
		RetryAfter: 1 + m.jitter(),
	})
}

// refuse answers 429 for a limited decision whose headers are set.
func (m *Middleware) refuse(w http.ResponseWriter, d Decision) {
	name := m.cfg.Name
	if d.Policy.Name != "" && validName(d.Policy.Name) == nil {
		name = d.Policy.Name
	}
	wait := retryBase(d) + m.jitter()
	writeProblem(w, problem{
		Type:             quotaExceeded,
		Title:            "Request quota exceeded",
		Status:           http.StatusTooManyRequests,
		Detail:           fmt.Sprintf("policy %q admits no more requests now; retry after %d s", name, wait),
		ViolatedPolicies: []string{name},
		RetryAfter:       wait,
	})
}

// jitter is a uniform whole number of seconds in [0, Config.Jitter].
func (m *Middleware) jitter() int64 {
	n := int64(m.cfg.Jitter / time.Second)
	if n <= 0 {
		return 0
	}
	// Clamped: a Config.Rand outside its contract must not move
	// Retry-After below the base.
	return min(max(m.rand(n+1), 0), n)
}

// release gives back what Check held once the handler returned. It does
// not inherit the request's cancellation: a client that hung up still
// frees its slot.
func (m *Middleware) release(r *http.Request, rel Releaser, key string, d Decision) {
	m.releaseWithin(context.WithoutCancel(r.Context()), rel, key, d)
}

func (m *Middleware) releaseWithin(ctx context.Context, rel Releaser, key string, d Decision) {
	_, err := m.breaker.Execute(func() (Decision, error) {
		return within(ctx, m.cfg.Timeout, nil, func(ctx context.Context) (Decision, error) {
			return Decision{}, rel.Release(ctx, m.cfg.Client, key, d)
		})
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		err = fmt.Errorf("%w: %w", ErrBreakerOpen, err)
	}
	if err != nil {
		// The lease ends on its own after Concurrency.Lease.
		m.metrics.failed("release", reason(err))
	}
}

// reason labels a failure for metrics.
func reason(err error) string {
	switch {
	case errors.Is(err, ErrBreakerOpen):
		return "breaker_open"
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, ErrClientGone):
		return "client_gone"
	case answered(err):
		return "error_reply"
	}
	return "unreachable"
}

// stateChanged reports breaker transitions.
func (m *Middleware) stateChanged(name string, from, to gobreaker.State) {
	m.metrics.breakerState(to)
	if m.cfg.Logger != nil {
		m.cfg.Logger.Warn("sluice circuit breaker", "policy", name, "from", from.String(), "to", to.String())
	}
}
