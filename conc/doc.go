// Package conc is the concurrent-requests limiter behind CONC.ACQUIRE,
// CONC.RELEASE, CONC.RENEW and CONC.GET: it caps how many requests for one
// key may be in flight at once, the way Stripe's concurrent-requests limiter
// does with a sorted set of request ids scored by time.
//
// A request holds a lease: a slot identified by its request id that lasts
// until an expiry instant. Leases end early when released, and on their own
// at expiry so that a client that crashes without releasing cannot hold a
// slot forever. A lease whose expiry is at or before now no longer exists:
// it counts for nothing and is dropped on the next access.
//
// Like the other algorithm packages, conc is pure: every operation is a
// deterministic function of the stored leases, the instant now (unix
// nanoseconds, passed in) and the arguments. Durations are nanoseconds; the
// command layer converts the seconds clients send.
package conc
