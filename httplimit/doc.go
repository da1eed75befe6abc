// Package httplimit is net/http middleware that asks sluice whether each
// request may pass and tells the client what it asked, in headers every
// HTTP client can read.
//
// For each request the middleware derives a limiter key (Config.Key), sends
// one sluice command (Config.Limit: SW.CHECK, FW.CHECK, CL.THROTTLE,
// QUOTA.CHECK, or CONC.ACQUIRE before and CONC.RELEASE after the handler)
// and maps the five-integer limiter reply onto:
//
//   - RateLimit-Policy and RateLimit, the structured fields of
//     draft-ietf-httpapi-ratelimit-headers-10, on every answered response;
//   - on a refusal: status 429, Retry-After of at least one second (plus
//     optional jitter, so refused clients do not return in lockstep) and an
//     RFC 9457 problem+json body.
//
// sluice being down, slow (Config.Timeout) or answering with an error fails
// open (the handler runs, without rate-limit headers) or closed (503), as
// Config.FailOpen says. A circuit breaker (github.com/sony/gobreaker/v2)
// stops calling a sluice that keeps failing, so a dead limiter costs
// requests nothing while it is open, and probes it again after
// Config.Breaker.OpenFor.
//
// A Limit receives the request as well as its key, so a limit that derives
// its own command from the request (RL.CHECK with a domain and a descriptor
// function, once sluice has policies) is one more Limit implementation, and
// the policy name and window it reports travel in Decision.Policy.
package httplimit
