// Package quota is the calendar-period quota behind QUOTA.CHECK: a counter of
// units per calendar period (HOUR, DAY, WEEK, MONTH, YEAR) in an IANA time
// zone, optionally phased to a subscription instant (the billing anniversary),
// so that "10 000 calls a month, renewed on the day you subscribed" is one key.
//
// It is pure: every function takes now (Unix nanoseconds) as a parameter and
// never reads the clock. Calendar math uses the tz database embedded in the
// binary (time/tzdata), so results do not depend on /usr/share/zoneinfo being
// present (when it is present, time.LoadLocation prefers it; replicas should
// run the same tzdata).
//
// # Periods
//
// A schedule is a sequence of wall-clock start times W_k in its zone. Without
// an anchor they are calendar boundaries: the top of every hour, midnight,
// Monday 00:00 (ISO weeks), the 1st of the month 00:00, Jan 1 00:00. With an
// anchor, the anchor's wall-clock reading in the zone supplies the phase: its
// minute and second (HOUR), its time of day (DAY), weekday and time (WEEK),
// day of month and time (MONTH) or month, day and time (YEAR). A day of month
// the month lacks is clamped to its last day (anchor Jan 31 → Feb 28 or 29,
// Mar 31, Apr 30; a YEAR anchor on Feb 29 → Feb 28 in common years). The
// anchor gives the phase only: periods extend before it as well as after it.
//
// # Wall-clock times that do not exist or occur twice
//
// Period k starts at the first instant at which the zone's wall clock reads
// W_k or later. Where W_k occurs once that is W_k itself. Where it occurs twice
// (the repeated hour after a fall-back) it is the first occurrence. Where it
// does not exist (the hour skipped by a spring-forward) it is the instant the
// clock jumps past it, i.e. the transition itself: a quota due to renew at
// 02:30 on a night that goes from 01:59:59 to 03:00 renews at 03:00. The rule
// is monotone, so periods never overlap (a period whose start and the next
// both fall in one skipped stretch is empty and never current, as Samoa's
// skipped 2011-12-30 is for DAY); periods are wall-clock lengths (a DAY
// across spring-forward in America/New_York is 23 h, across fall-back 25 h;
// the repeated wall hour at fall-back is one 2 h HOUR period).
//
// # State and schedule changes
//
// The stored State carries its schedule, limit, the current period's bounds
// and the units used in it, so GET, REFUND and RESET need no parameters.
// When CHECK arrives with the stored schedule and now is before the stored
// period's end, the stored period is used as is (also when the clock has gone
// backwards: periods never move back, so usage is never forgiven by a clock
// step). Otherwise the bounds are recomputed for now under the request's
// schedule, and the used count is carried over only when the new period
// starts at or before the stored period's start: then every counted unit was
// consumed inside the new period (usage happened at or after the stored start
// and no later than now, which is inside the new period). In every other case
// (an ordinary roll-over, or a schedule change that moves the start later,
// e.g. MONTH to DAY) the count starts from 0, because one counter cannot be
// split between the part that lies in the new period and the part that does
// not. A new limit is simply adopted; Remaining is never below 0.
//
// # Expiry
//
// A key holds nothing of value once its period has ended (its used count
// would roll to 0), but GET can only answer for keys that exist. State.ExpireAt
// is therefore the end of the current period plus one more period length of
// idleness; the command layer deletes the key at that instant.
package quota
