package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/sluice-rl/sluice/raftmux"
	"github.com/sluice-rl/sluice/rls"
)

// listenFrontDoors opens the listeners beside the RESP port: the HTTP one
// (--http-addr: /metrics, and the rate limit service's /json and
// /healthcheck) and Envoy's gRPC rate limit service (--grpc-addr). Each is
// a sibling of the RESP server: it parses its own protocol, then runs
// machine commands through the same path (rls.NodeDecider).
func (s *Server) listenFrontDoors() error {
	if s.cfg.HTTPAddr == "" && s.cfg.GRPCAddr == "" {
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.rulesCollectors()...)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := NewMetrics(s.env, s.store).Register(reg); err != nil {
		return err
	}
	rm, err := rls.NewMetrics(reg)
	if err != nil {
		return err
	}
	// A follower forwards its callers' calls to the leader's member port.
	fwd := rls.ForwardOptions{MemberAt: s.memberAt}
	if s.memberClient != nil {
		fwd.Members = s.memberClient
	}
	s.decider = rls.NewNodeDecider(s.env, s.node, fwd, rm)
	s.rls, err = rls.NewService(rls.Config{ResponseHeaders: s.cfg.RLSResponseHeaders, Password: s.cfg.RequirePass, Log: s.log, Now: s.env.Clock.Now,
		Quota: s.cfg.RLQS},
		s.decider, rm, rls.KnownDomains(s.env))
	if err != nil {
		return err
	}
	if s.cfg.GRPCAddr != "" {
		raw, err := s.doorSocket(&s.grpcRaw, s.cfg.GRPCAddr, "grpc")
		if err != nil {
			return err
		}
		gln := newCappedListener(raw, s.cfg.Doors.GRPCMaxConns)
		s.grpcLn = gln
		// A connection must finish its handshake in time, and one with no
		// call in flight is closed after the idle timeout (GOAWAY, then the
		// close): neither a silent dial nor a preface-only client holds a
		// descriptor for long.
		opts := []grpc.ServerOption{grpc.ConnectionTimeout(s.cfg.Doors.GRPCHandshakeTimeout),
			grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: s.cfg.Doors.GRPCIdleTimeout})}
		// The password is checked on a call's headers, before a stream
		// waits for its body; streams per connection, header bytes and
		// streams waiting for a body are bounded (rls.Guard).
		s.grpcGuard = rls.NewGuard(rls.GuardConfig{Password: s.cfg.RequirePass, BodyTimeout: s.cfg.Doors.GRPCReadTimeout,
			MaxStreams: uint32(s.cfg.Doors.GRPCMaxStreams), CloseConn: gln.closeRemote, CallBegins: gln.callBegins})
		opts = append(opts, s.grpcGuard.ServerOptions()...)
		if s.cert != nil {
			opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{*s.cert}, MinVersion: tls.VersionTLS12})))
		}
		// Calls run on kept goroutines whose stacks have already grown
		// to what a decision needs: a goroutine per call spent a fifth of
		// the CPU growing its stack (+10% calls/s at 50 callers).
		opts = append(opts, grpc.NumStreamWorkers(grpcStreamWorkers))
		// The service's own messages without protobuf's reflection.
		opts = append(opts, grpc.ForceServerCodecV2(rls.Codec()))
		s.grpc = grpc.NewServer(opts...)
		s.rls.Register(s.grpc)
		reg.MustRegister(doorCounters("grpc", gln)...)
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_grpc_calls_refused_total",
				Help: "gRPC calls the door refused on their headers: without the password, past the budget of calls waiting for their request, or on a connection being closed."},
				func() float64 { return float64(s.grpcGuard.Refused()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_grpc_calls_overdue_total",
				Help: "gRPC calls that sent no request within --grpc-read-timeout (their connection was closed)."},
				func() float64 { return float64(s.grpcGuard.Overdue()) }))
		go s.grpc.Serve(gln)
		s.log.Info("rate limit service (gRPC)", "addr", gln.Addr().String())
	}
	if s.cfg.HTTPAddr != "" {
		raw, err := s.doorSocket(&s.httpRaw, s.cfg.HTTPAddr, "http")
		if err != nil {
			if s.grpc != nil {
				s.grpc.Stop()
			}
			return err
		}
		hln := newCappedListener(raw, s.cfg.Doors.HTTPMaxConns)
		hln.refuse = refuseHTTP
		s.httpLn = hln
		mux := http.NewServeMux()
		metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		if s.cfg.MetricsAuth {
			mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
				if s.passwordAuthorized(w, r, "/metrics") {
					metrics.ServeHTTP(w, r)
				}
			})
		} else {
			mux.Handle("/metrics", metrics)
		}
		mux.Handle("/json", s.rls.JSONHandler())
		mux.Handle("/healthcheck", s.rls.HealthHandler())
		mux.HandleFunc("GET /{$}", s.statusHTML)
		mux.HandleFunc("GET /status.json", s.statusJSONHandler)
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
		mux.HandleFunc("GET /readyz", s.readyz)
		if s.cfg.PProf {
			// The profiler asks for the password when one is set: its
			// cmdline shows --requirepass itself, and its profiles the
			// process' memory.
			for path, h := range map[string]http.HandlerFunc{"/debug/pprof/": pprof.Index, "/debug/pprof/cmdline": pprof.Cmdline,
				"/debug/pprof/profile": pprof.Profile, "/debug/pprof/symbol": pprof.Symbol, "/debug/pprof/trace": pprof.Trace} {
				mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
					if s.passwordAuthorized(w, r, "the profiler") {
						h(w, r)
					}
				})
			}
		}
		d := s.cfg.Doors
		s.http = &http.Server{Handler: mux, ReadHeaderTimeout: min(5*time.Second, d.HTTPReadTimeout),
			ReadTimeout: d.HTTPReadTimeout, WriteTimeout: d.HTTPWriteTimeout, IdleTimeout: d.HTTPIdleTimeout,
			ConnState: markIdle}
		reg.MustRegister(doorCounters("http", hln)...)
		go s.http.Serve(hln)
		s.log.Info("http endpoint", "addr", hln.Addr().String())
	}
	return nil
}

// readyz answers 200 while this node can decide — a single node, or a
// member that hears from a leader and has applied what is committed — and
// 503 otherwise; it says nothing more, for probes reach it unauthenticated.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.node != nil && !s.node.Ready() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ready\n"))
}

// trustingCert is a client TLS config trusting the system's roots and
// cert (read from file).
func trustingCert(cert *tls.Certificate, file string) (*tls.Config, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	for _, der := range cert.Certificate {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("server: TLS certificate %s: %w", file, err)
		}
		pool.AddCert(c)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// MemberGuard is how a member port shared by several members of one
// process is kept (cmd/sluice): the cluster's secret, and with
// --tls-cert-file TLS, as each member keeps a port of its own.
func MemberGuard(c Config) (raftmux.Guard, error) {
	if c.TLSCertFile == "" {
		return guardOf(c.Replication, nil, "")
	}
	cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
	if err != nil {
		return raftmux.Guard{}, fmt.Errorf("server: TLS certificate %s / key %s: %w", c.TLSCertFile, c.TLSKeyFile, err)
	}
	return guardOf(c.Replication, &cert, c.TLSCertFile)
}

// guardOf is a member port's guard: r's secret and connection limits, and with cert (read from
// file; nil: plain TCP) TLS — accepted connections with the certificate,
// dialed ones trusting it and the system's roots.
func guardOf(r Replication, cert *tls.Certificate, file string) (raftmux.Guard, error) {
	g := raftmux.Guard{Secret: r.Secret, Limits: r.MemberLimits}
	if cert == nil {
		return g, nil
	}
	client, err := trustingCert(cert, file)
	if err != nil {
		return g, err
	}
	g.ServerTLS = &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
	g.ClientTLS = client
	return g, nil
}

// closeFrontDoors stops the HTTP and gRPC listeners: in-flight calls finish
// (until ctx ends), health turns NOT_SERVING first.
func (s *Server) closeFrontDoors(ctx context.Context) {
	if s.rls != nil {
		s.rls.Close()
	}
	if s.grpc != nil {
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.grpc.Stop()
		}
	}
	if s.grpcGuard != nil {
		s.grpcGuard.Close()
	}
	if s.http != nil {
		s.http.Shutdown(ctx)
	}
}

// grpcStreamWorkers is how many goroutines serve gRPC calls (more calls at
// once get a goroutine each, as without workers).
const grpcStreamWorkers = 64

// doorCounters are a door's connection counts at its cap: closed for a
// newer one, and turned away because every connection was busy.
func doorCounters(door string, l *cappedListener) []prometheus.Collector {
	labels := prometheus.Labels{"door": door}
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_door_connections_evicted_total", ConstLabels: labels,
			Help: "Idle connections a door closed at its cap to take a newer one."},
			func() float64 { return float64(l.evicted.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_door_connections_refused_total", ConstLabels: labels,
			Help: "New connections a door turned away at its cap because every connection was busy."},
			func() float64 { return float64(l.refused.Load()) }),
	}
}
