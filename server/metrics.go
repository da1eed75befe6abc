package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/commands"
)

// Metrics exposes the server's counters to Prometheus. It reads the same
// counters INFO reads, so the two never disagree. Rate-limit keys are never
// labels: cardinality stays bounded by the command table.
type Metrics struct {
	env      *commands.Env
	calls    *prometheus.Desc
	limited  *prometheus.Desc
	clients  *prometheus.Desc
	conns    *prometheus.Desc
	rejected *prometheus.Desc
	expired  *prometheus.Desc
	keys     *prometheus.Desc
}

// NewMetrics describes the metrics of one server.
func NewMetrics(env *commands.Env) *Metrics {
	return &Metrics{
		env:      env,
		calls:    prometheus.NewDesc("sluice_commands_total", "Commands run, by command.", []string{"command"}, nil),
		limited:  prometheus.NewDesc("sluice_limited_total", "Requests a limiter refused, by command.", []string{"command"}, nil),
		clients:  prometheus.NewDesc("sluice_connected_clients", "Open client connections.", nil, nil),
		conns:    prometheus.NewDesc("sluice_connections_received_total", "Connections accepted.", nil, nil),
		rejected: prometheus.NewDesc("sluice_connections_rejected_total", "Connections refused at max clients.", nil, nil),
		expired:  prometheus.NewDesc("sluice_expired_keys_total", "Keys removed by the expiry sweep.", nil, nil),
		keys:     prometheus.NewDesc("sluice_keys", "Keys held, expired ones not yet swept included.", nil, nil),
	}
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error { return reg.Register(m) }

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.calls, m.limited, m.clients, m.conns, m.rejected, m.expired, m.keys} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.env.Table.Commands() {
		if n := c.Calls(); n > 0 {
			ch <- prometheus.MustNewConstMetric(m.calls, prometheus.CounterValue, float64(n), c.Name)
		}
		if n := c.Limited(); n > 0 {
			ch <- prometheus.MustNewConstMetric(m.limited, prometheus.CounterValue, float64(n), c.Name)
		}
	}
	st := m.env.Stats
	ch <- prometheus.MustNewConstMetric(m.clients, prometheus.GaugeValue, float64(st.ConnectedClients.Load()))
	ch <- prometheus.MustNewConstMetric(m.conns, prometheus.CounterValue, float64(st.ConnectionsReceived.Load()))
	ch <- prometheus.MustNewConstMetric(m.rejected, prometheus.CounterValue, float64(st.ConnectionsRejected.Load()))
	ch <- prometheus.MustNewConstMetric(m.expired, prometheus.CounterValue, float64(st.ExpiredKeys.Load()))
	ch <- prometheus.MustNewConstMetric(m.keys, prometheus.GaugeValue, float64(m.env.Machine.Keys().Stats().Keys))
}
