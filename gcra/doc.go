// Package gcra is the generic cell rate algorithm behind
// CL.THROTTLE <key> <max_burst> <count per period> <period> [<quantity>].
//
// GCRA keeps one number per key, the theoretical arrival time (TAT): the
// instant at which the key would be back to empty if requests had arrived
// exactly on the nominal schedule. Each unit of quantity pushes the TAT one
// emission interval (ei = period / count) further; a request is admitted when
// the pushed TAT is no more than the delay variation tolerance
// (dvt = ei × (max_burst + 1)) ahead of now. Seen as a leaky bucket, TAT − now
// is the bucket level in nanoseconds, dvt is its capacity and it drains one
// nanosecond per nanosecond, so no background process is needed and the key
// can expire at its TAT: an absent key and an empty bucket are the same thing.
//
// Throttle is a pure function of (stored TAT, now, limit, quantity); the
// command layer owns the clock, the keyspace and the seconds conversion
// (limiter.Result.Reply). Replies match redis-cell v0.5 wherever redis-cell
// is right. Where it is not, we deliberately differ:
//
//   - Precision: everything is integer nanoseconds. redis-cell computes ei in
//     float64 and "remaining" from whole microseconds, so rates above
//     1,000,000/s divide by zero, and any ei that is not a whole number of
//     microseconds over-reports remaining. Here count 1e9 per second (ei =
//     1 ns) is exact.
//   - Remaining never exceeds limit (max_burst + 1), and reset_after is never
//     negative, even for a stored TAT that lies in the past.
//   - Input errors: negative max_burst, count, period or quantity, a rate
//     whose emission interval is under 1 ns, and a burst window that
//     overflows int64 are rejected with sentinel errors instead of producing
//     nonsense. Count or period 0 is "zero rates are not supported", as in
//     redis-cell.
//   - A quantity above the limit can never pass: it is refused with
//     retry_after −1 without multiplying ei × quantity, so a huge quantity
//     cannot overflow.
//   - A quantity of 0 is a peek that never creates or rewrites a key
//     (redis-cell may write the key back with a fresh expiry).
package gcra
