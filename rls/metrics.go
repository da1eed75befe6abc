package rls

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the service's series. Labels are transports, results, codes
// and domains of the loaded rules (any other domain is "other"); never a
// descriptor key or value.
type Metrics struct {
	requests  *prometheus.CounterVec
	decisions *prometheus.CounterVec
	shadow    *prometheus.CounterVec
	forwarded *prometheus.CounterVec
	duration  *prometheus.HistogramVec
}

// NewMetrics makes the service's series and registers them on reg (nil:
// kept but not exported).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_rls_requests_total",
			Help: "ShouldRateLimit calls, by transport (grpc, http) and result (ok, over_limit, invalid, unavailable, unauthenticated, error)."},
			[]string{"transport", "result"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_rls_decisions_total",
			Help: "ShouldRateLimit decisions by domain (of the loaded rules, else \"other\") and overall code (OK, OVER_LIMIT)."},
			[]string{"domain", "code"}),
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_rls_shadow_refusals_total",
			Help: "Descriptors a shadow-mode rule would have refused, by domain."}, []string{"domain"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_rls_forwarded_total",
			Help: "Calls a follower forwarded to the leader, by result (answered; unsent: the dial failed, nothing reached the leader; failed: the outcome is unknown)."}, []string{"result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_rls_duration_seconds",
			Help:    "Time to answer a ShouldRateLimit call, by transport.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16)}, []string{"transport"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.decisions, m.shadow, m.forwarded, m.duration} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) observe(transport, result string, took time.Duration) {
	m.requests.WithLabelValues(transport, result).Inc()
	m.duration.WithLabelValues(transport).Observe(took.Seconds())
}
