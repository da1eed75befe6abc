package httplimit

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

// metrics are the middleware's own series, labelled by policy name and
// outcome only: a limiter key never becomes a label. A nil *metrics (no
// Config.Metrics) records nothing.
type metrics struct {
	decisions *prometheus.CounterVec
	failures  *prometheus.CounterVec
	breaker   prometheus.Gauge
	latency   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, policy string) (*metrics, error) {
	labels := prometheus.Labels{"policy": policy}
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "sluice_httplimit_requests_total",
			Help:        "Requests by what the middleware did: allowed, limited, failed_open, failed_closed.",
			ConstLabels: labels,
		}, []string{"decision"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "sluice_httplimit_failures_total",
			Help:        "sluice calls without a decision, by call (check, release) and reason (timeout, unreachable, error_reply, breaker_open, client_gone).",
			ConstLabels: labels,
		}, []string{"call", "reason"}),
		breaker: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "sluice_httplimit_breaker_state",
			Help:        "Circuit breaker in front of sluice: 0 closed, 1 half-open, 2 open.",
			ConstLabels: labels,
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "sluice_httplimit_check_seconds",
			Help:        "Time to get a decision from sluice, including calls that failed or timed out.",
			ConstLabels: labels,
			Buckets:     prometheus.ExponentialBuckets(0.0001, 2, 14), // 100 µs … 0.8 s
		}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.failures, m.breaker, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("%w: metrics: %w", ErrConfig, err)
		}
	}
	return m, nil
}

func (m *metrics) decided(decision string) {
	if m != nil {
		m.decisions.WithLabelValues(decision).Inc()
	}
}

func (m *metrics) failed(call, reason string) {
	if m != nil {
		m.failures.WithLabelValues(call, reason).Inc()
	}
}

func (m *metrics) observe(d time.Duration) {
	if m != nil {
		m.latency.Observe(d.Seconds())
	}
}

func (m *metrics) breakerState(s gobreaker.State) {
	if m != nil {
		// gobreaker numbers its states closed 0, half-open 1, open 2.
		m.breaker.Set(float64(s))
	}
}
