package rls

import (
	"errors"
	"io"
	"net/http"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxJSONBody bounds a POST /json body.
const maxJSONBody = 1 << 20

// JSONHandler is envoyproxy/ratelimit's HTTP twin of ShouldRateLimit: POST
// /json with a RateLimitRequest in protojson, answered with the
// RateLimitResponse in protojson — 200 when OK, 429 when OVER_LIMIT. A bad
// request is 400, a call that got no decision 503 (no leader) or 500, each
// with the reason as text.
func (s *Service) JSONHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST a RateLimitRequest as JSON", http.StatusMethodNotAllowed)
			return
		}
		if s.cfg.Password != "" && !s.authorized(r.Header.Get("Authorization")) {
			s.metrics.observe("http", "unauthenticated", 0)
			http.Error(w, "this rate limit service needs Authorization: Bearer <password>", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
		if err != nil {
			s.metrics.observe("http", "invalid", 0)
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, "request body over 1 MiB", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req pb.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			s.metrics.observe("http", "invalid", 0)
			http.Error(w, "not a RateLimitRequest: "+err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := s.decide(r.Context(), "http", &req)
		if err != nil {
			st := status.Convert(err)
			code := http.StatusInternalServerError
			switch st.Code() {
			case codes.InvalidArgument:
				code = http.StatusBadRequest
			case codes.Unavailable:
				code = http.StatusServiceUnavailable // no leader: nothing logged, retry
			case codes.ResourceExhausted:
				code = http.StatusInsufficientStorage // over maxmemory: nothing charged, not retryable as such
			}
			http.Error(w, st.Message(), code)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		w.Write(out)
	})
}

// HealthHandler is envoyproxy/ratelimit's GET /healthcheck: 200 "OK" while
// this node can decide, 500 otherwise.
func (s *Service) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !s.dec.Ready() {
			http.Error(w, "not ready: no leader", http.StatusInternalServerError)
			return
		}
		w.Write([]byte("OK"))
	})
}
