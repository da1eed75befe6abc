package rls

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/internal/secret"
	"github.com/sluice-rl/sluice/machine"
)

// ServiceName is the gRPC service Envoy calls (and the name its health
// status is kept under, beside the server's overall "").
const ServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// Service answers ShouldRateLimit. It is safe for concurrent use.
type Service struct {
	pb.UnimplementedRateLimitServiceServer
	cfg     Config
	dec     Decider
	metrics *Metrics
	// known reports whether a domain has rules (for the metrics' labels).
	known  func(domain string) bool
	health *health.Server
	stop   chan struct{}
	done   chan struct{}
	// args are the argBufs requests are written into.
	args sync.Pool
	// quotaStreams counts the RLQS streams open (QuotaLimits.Streams).
	quotaStreams atomic.Int64
}

// NewService answers with dec. known tells the domains of the loaded rules
// apart (nil: every domain is "other" in metrics); metrics may be nil.
func NewService(cfg Config, dec Decider, metrics *Metrics, known func(string) bool) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if metrics == nil {
		metrics, _ = NewMetrics(nil)
	}
	if known == nil {
		known = func(string) bool { return false }
	}
	s := &Service{cfg: cfg.withDefaults(), dec: dec, metrics: metrics, known: known,
		health: health.NewServer(), stop: make(chan struct{}), done: make(chan struct{})}
	s.setHealth()
	go s.watchHealth()
	return s, nil
}

// KnownDomains is the known function for an Env's loaded rules.
func KnownDomains(env *commands.Env) func(string) bool {
	return func(d string) bool {
		st := env.Machine.Rules()
		return st != nil && st.Set != nil && st.Set.Domain(d) != nil
	}
}

// Register adds the rate limit service, the rate limit quota service
// (RLQS, rlqs.go), the health service and server reflection to g.
func (s *Service) Register(g *grpc.Server) {
	pb.RegisterRateLimitServiceServer(g, s)
	rlqspb.RegisterRateLimitQuotaServiceServer(g, quotaServer{s: s})
	healthpb.RegisterHealthServer(g, s.health)
	reflection.Register(g)
}

// healthEvery is how often the health status follows the node's state.
const healthEvery = 50 * time.Millisecond

func (s *Service) watchHealth() {
	defer close(s.done)
	t := time.NewTicker(healthEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.health.Shutdown()
			return
		case <-t.C:
			s.setHealth()
		}
	}
}

func (s *Service) setHealth() {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if s.dec.Ready() {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(ServiceName, st)
	s.health.SetServingStatus(QuotaServiceName, st)
}

// Ready reports what the health service says: this node can decide.
func (s *Service) Ready() bool { return s.dec.Ready() }

// Close marks the service NOT_SERVING and stops following the node.
func (s *Service) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// ShouldRateLimit implements Envoy's rate limit service.
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if s.cfg.Password != "" && !s.authorized(bearer(ctx)) {
		s.metrics.observe("grpc", "unauthenticated", 0)
		return nil, status.Error(codes.Unauthenticated, "sluice: this rate limit service needs authorization: Bearer <password>")
	}
	return s.decide(ctx, "grpc", req)
}

// bearer is the gRPC call's authorization metadata.
func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) > 0 {
		return v[0]
	}
	return ""
}

// authorized checks an authorization value against the password.
func (s *Service) authorized(auth string) bool { return bearerMatches(s.cfg.Password, auth) }

// bearerMatches reports whether auth is "Bearer <password>", comparing in
// constant time.
func bearerMatches(password, auth string) bool {
	pw, ok := strings.CutPrefix(auth, "Bearer ")
	return ok && secret.Equal(password, pw)
}

// decide checks, decides and counts one request; errors are gRPC statuses.
func (s *Service) decide(ctx context.Context, transport string, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	start := time.Now()
	if err := s.cfg.Limits.check(req); err != nil {
		s.metrics.observe(transport, "invalid", time.Since(start))
		return nil, status.Error(codes.InvalidArgument, strings.TrimPrefix(err.Error(), "rls: invalid request: "))
	}
	a, _ := s.args.Get().(*argBuf)
	if a == nil {
		a = &argBuf{}
	}
	v, err := s.dec.Decide(ctx, commandArgs(req, a))
	s.args.Put(a) // the decider keeps none of the words
	var d decision
	if err == nil {
		d, err = toDecision(v, len(req.Descriptors))
	}
	if err != nil {
		st := errorStatus(err)
		s.metrics.observe(transport, failedResult(st.Code()), time.Since(start))
		if st.Code() != codes.Unavailable && st.Code() != codes.InvalidArgument {
			s.cfg.Log.Warn("rate limit call failed", "domain", req.Domain, "err", err)
		}
		return nil, st.Err()
	}
	if s.cfg.ResponseHeaders {
		addHeaders(d)
	}
	domain := "other"
	if s.known(req.Domain) {
		domain = req.Domain
	}
	code, result := "OK", "ok"
	if d.resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
		code, result = "OVER_LIMIT", "over_limit"
	}
	s.metrics.decisions.WithLabelValues(domain, code).Inc()
	if d.shadow > 0 {
		s.metrics.shadow.WithLabelValues(domain).Add(float64(d.shadow))
	}
	s.metrics.observe(transport, result, time.Since(start))
	return d.resp, nil
}

// failedResult is the metrics' result of a call that got no decision.
func failedResult(c codes.Code) string {
	switch c {
	case codes.Unavailable:
		return "unavailable"
	case codes.InvalidArgument:
		return "invalid"
	}
	return "error"
}

// withoutCode is an error reply's text without its RESP code word ("ERR
// "), for a gRPC status's message.
func withoutCode(msg string) string { return strings.TrimPrefix(msg, "ERR ") }

// errorStatus maps why a call got no decision to a gRPC status: nothing
// happened and another try may work (UNAVAILABLE), the input (a machine
// check refused it: INVALID_ARGUMENT), or the outcome may be unknown or a
// bug (UNKNOWN, INTERNAL).
func errorStatus(err error) *status.Status {
	var e errReply
	switch {
	case errors.Is(err, errTooManyBuckets), errors.Is(err, errTooManyStreams):
		return status.New(codes.ResourceExhausted, "sluice: "+strings.TrimPrefix(err.Error(), "rls: "))
	case errors.Is(err, ErrUnavailable):
		return status.New(codes.Unavailable, "sluice: no leader can decide now")
	case errors.Is(err, ErrOutcomeUnknown):
		return status.New(codes.Unknown, "sluice: "+err.Error()+" (it may have been charged: do not retry it as unsent)")
	case errors.Is(err, commands.ErrNotDurable):
		return status.New(codes.Unavailable, "sluice: "+err.Error())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return status.New(codes.DeadlineExceeded, "sluice: the call ended before the decision was known: "+err.Error())
	case errors.As(err, &e):
		// Why, typed by whoever answered; the text is only said.
		switch e.reason {
		case machine.ReasonInvalid:
			return status.New(codes.InvalidArgument, "sluice: "+withoutCode(e.msg))
		case machine.ReasonWrongType, machine.ReasonInternal:
			return status.New(codes.Internal, "sluice: "+e.msg)
		case machine.ReasonNotNow:
			return status.New(codes.Unavailable, "sluice: "+e.msg)
		case machine.ReasonRulesDiffer:
			return status.New(codes.FailedPrecondition, "sluice: "+withoutCode(e.msg))
		case machine.ReasonOutOfMemory:
			// Over maxmemory, a call that would create a counter: nothing
			// was charged.
			return status.New(codes.ResourceExhausted, "sluice: "+e.msg)
		}
		// Unknown, or not said (a member of an older version): it may
		// have been charged.
		return status.New(codes.Unknown, "sluice: "+e.msg)
	}
	// Anything else may have happened after the call was logged: only
	// what is known to have done nothing is UNAVAILABLE.
	return status.New(codes.Unknown, "sluice: "+err.Error())
}
