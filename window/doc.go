// Package window holds the window rate limiters behind SW.CHECK and
// FW.CHECK as pure functions: (state, exists, now, params, cost) → (new
// state, store, expireAt, limiter.Result). No clock, no I/O, no locks; the
// keyspace owns the state and deletes a key at expireAt.
//
// Three algorithms, each holding a key to Limit units per Window: the
// counter approximately, the log exactly, the fixed window per aligned
// window (see "How far each can overshoot"):
//
//   - CounterState, the sliding window counter (SW.CHECK): two adjacent
//     fixed sub-windows aligned to multiples of Window since the Unix epoch;
//     estimate = Prev·(1 − elapsed/Window) + Curr. Four int64s per key. The
//     test is done scaled by Window in 128-bit integers (no floats):
//     Prev·(Window−elapsed) + (Curr+cost)·Window ≤ Limit·Window.
//   - LogState, the sliding window log (SW.CHECK … EXACT): every admitted
//     unit's instant, exact over any interval. Limited to MaxLogLimit.
//   - FixedState, the fixed window (FW.CHECK): one count per aligned window.
//
// # Shared semantics
//
// Rejected requests are never counted. Cost 0 is a peek: it is answered by
// the same rule (Limited only when the key is already over its limit, e.g.
// after the limit was lowered) and never creates or changes a key. A cost
// above the limit is refused with RetryAfter = limiter.Never. store is true
// exactly when units were admitted.
//
// Remaining is how many units would pass right now: ⌊Limit − estimate⌋ for
// the counter, Limit − units in the window for the log and fixed window,
// never below 0. RetryAfter is how long, if nothing else arrives, until a
// request of the same cost passes; it is exact to the nanosecond for all
// three (one nanosecond earlier the request is still refused). ResetAfter is
// how long until the key holds nothing (0 if it already does); for the
// fixed window that is the end of the current window.
//
// A now earlier than the key's stored sub-window (counter, fixed) or newest
// admission (log) is treated as that instant, so a clock stepping back
// never frees capacity.
//
// Changed parameters: a new limit applies at once to what is already
// counted (lowering it can leave a key over its limit until units age out).
// A new window makes the counter and fixed window start the key over, as
// if it did not exist: their counts belong to sub-windows of the old length
// and cannot be re-divided. The log keeps its instants, which are exact
// whatever the window, and simply counts those within the new window (a
// longer window cannot see entries already pruned under the shorter one).
//
// # For the caller
//
// NewParams turns the commands' whole seconds into Params, refusing windows
// whose nanoseconds would overflow. Errors are the sentinels in errors.go,
// returned unwrapped. When store is false the key must be left exactly as it
// was (and not created), and expireAt is 0; when true, the returned state
// replaces the old one and the key expires at expireAt. The counter and the
// log are different types behind one command: what SW.CHECK … EXACT does to
// a key holding a counter (or the reverse) is the command layer's call.
//
// LogState's successor may share arrays with its predecessor, like append:
// the old value stays valid to read or encode (Check never writes what it
// can see), but only one successor of a state may be kept (Clone to branch).
//
// # How far each can overshoot
//
// Over any interval of length d ≤ Window, units admitted (limit and window
// fixed):
//
//   - log: at most Limit, by construction.
//   - fixed window: up to 2·Limit, even for d of 2 ns: Limit in the last
//     nanosecond of one window, Limit in the first of the next.
//   - counter: strictly less than Limit·(1 + d/Window), so less than
//     2·Limit over a full window. Why: such an interval lies within two
//     sub-windows k−1 and k, ending e < d into k. It holds at most Prev
//     (the whole of k−1, ≤ Limit) plus what k admitted up to e, which the
//     test caps at Limit − Prev·(Window−e)/Window; the sum is Limit +
//     Prev·e/Window < Limit·(1 + d/Window). The bound is nearly reached
//     when Prev arrives in the last nanosecond of k−1, where the estimate
//     wrongly assumes it was spread over the sub-window: with Limit 100 and
//     a 60 s window, 100 units at 59.999999999 s and 99 more at 119.999999998 s
//     pass, 199 within 60 s. Nor does it take an adversary: a key's first
//     burst of Limit, arriving a fraction f into a sub-window, is followed
//     under sustained load by about Limit·f more before it is a window old
//     (up to 178 per 60 s for 100 per 60 s in the tests' 5× overload
//     traces). Short bursts are what it does cap: for 100
//     per 60 s, fewer than 103.4 (so at most 103) in any 2 s, where the
//     fixed window lets 200 through.
//
// The design notes quote Cloudflare's 0.003% wrong decisions for the
// counter. That was measured on real traffic, mostly far from its limits,
// with every request counted, refused or not. It is not a bound: where
// traffic runs near the limit, decisions differing from the exact log are
// common (percent, not thousandths of one). compare_test.go measures them
// on random traces and asserts only the overshoot bound above.
//
// # Storage
//
// Each state has AppendBinary and a Decode function (varints, no version
// byte). LogState stores 12 bytes per distinct timestamp in two arrays,
// pruned by moving an index and compacted when full, so a key never holds
// more than about twice its live entries (MemoryBytes reports it).
package window
