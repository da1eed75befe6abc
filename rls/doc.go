// Package rls is sluice's front door for Envoy: the rate limit service API
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) over gRPC,
// with the gRPC health service and server reflection, and its HTTP twin
// (POST /json, GET /healthcheck) as envoyproxy/ratelimit serves them.
//
// It is a sibling of the RESP server, not a second state machine: a request
// is checked here (bad input is INVALID_ARGUMENT and charges nothing), then
// turned into one RL.SHOULDRATELIMIT machine command and run through the
// same path a RESP connection's command takes — the same apply on a single
// node, the same Raft batches on a replicated leader. A follower forwards
// the command to the leader over a kept-open RESP connection and answers
// what the leader answered, since Envoy load-balances over every host and
// cannot follow a redirect; with no leader the call is UNAVAILABLE and
// Envoy's failure_mode_deny decides.
//
// Decisions are envoyproxy/ratelimit's, field for field, with one
// difference: a request some descriptor refuses charges none of its
// descriptors (all or nothing, as RL.CHECK), where envoyproxy/ratelimit
// charges every one.
package rls
