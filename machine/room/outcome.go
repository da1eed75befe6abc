package room

import (
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/resp"
)

// An apply's Outcome and the typed results it carries, with their RESP
// form: every room answers in them, and every door reads them. A door that is not RESP (gRPC, HTTP, the member port) reads the
// typed result; the RESP reply is written from the same value. Every room
// answers in these types, so they are the core's.

// Outcome is what an apply tells its caller besides the reply.
type Outcome struct {
	// Limited is set when a limiter refused the request.
	Limited bool
	// Limit and RetryAfter are a refusal's limit and retry_after (seconds,
	// -1: never), as its reply gives them.
	Limit, RetryAfter int64
	// Rule is the rule RL.CHECK's reply names (nil otherwise); Shadow a
	// shadow-mode rule that would have refused the request (nil if none).
	Rule, Shadow *policy.Rule
	// Ticket is the journaled change the reply must wait for.
	Ticket Ticket
	// Statuses are RL.SHOULDRATELIMIT's typed result, one per descriptor
	// (the reply is written from them). Like every slice in an Outcome,
	// they are the caller's: no later apply writes them.
	Statuses []RLSStatus
	// Parts, for a transaction that ran (EXEC), are where its reply's
	// elements are: element i is reply[Parts[i]:Parts[i+1]]; nil when it
	// did not run (Err says why, or, with no Err, a watched key changed).
	Parts []int
	// Err is the error reply's text (without the '-') when a limiter
	// command (Command.Decides) or a transaction answered an error, or any
	// command panicked; "" otherwise. Reason says the same, typed: what a
	// door acts on.
	Err    string
	Reason Reason
	// Settled are a settle's rows, in the reserve's order (RL.SETTLE,
	// RL.CANCEL, RL.PART SETTLE and CANCEL that found something held:
	// Held).
	Settled []SettleRow
	Held    bool
	// Refusal says why, when Err is a part's refusal members act on
	// (ErrFenced, ErrRulesDiffer); nil otherwise.
	Refusal error
	// Check is RL.CHECK's (and RL.RESERVE's, a part's) typed result when
	// the command answered one (Checked).
	Check   CheckResult
	Checked bool
	// Lease is RL.LEASE's typed result when it answered one (Leased).
	Lease  LeaseResult
	Leased bool
	// Share is RL.SHARE's typed result when it answered one (Shared).
	Share  ShareResult
	Shared bool
	// Digest is RL.PART DIGEST's answer (a placement request's).
	Digest string
}

// CheckResult is RL.CHECK's and RL.CHECKALL's answer: the binding limit,
// in redis-cell's terms.
type CheckResult struct {
	// Limited: the request was refused (nothing was charged).
	Limited bool
	// Limit, Remaining are the binding limit's burst + 1 (or requests
	// per window) and what is left of it; RetryAfter (-1: never, or not
	// refused) and ResetAfter are whole seconds.
	Limit, Remaining, RetryAfter, ResetAfter int64
	// Name names the binding limit (a rule's id, RL.CHECKALL's key); ""
	// when no limit applies.
	Name string
	// Window is the policy window in seconds: the time over which Limit
	// holds (RateLimit-Policy's w).
	Window int64
}

// NoLimit is the answer when no limit applies: unlimited.
var NoLimit = CheckResult{Limit: -1, Remaining: -1, RetryAfter: -1}

// WriteCheck writes r as RL.CHECK's seven-element reply (a check a
// coordinator answered from its parts).
func WriteCheck(w *resp.Writer, r CheckResult) { writeCheck(w, r) }

// writeCheck writes r as a seven-element reply.
func writeCheck(w *resp.Writer, r CheckResult) {
	w.Array(7)
	w.Int(ReplyFlag(r.Limited))
	w.Int(r.Limit)
	w.Int(r.Remaining)
	w.Int(r.RetryAfter)
	w.Int(r.ResetAfter)
	w.BulkString(r.Name)
	w.Int(r.Window)
}

// RLSStatus is one descriptor's status in a RL.SHOULDRATELIMIT decision, as
// Envoy's DescriptorStatus carries it.
type RLSStatus struct {
	// Code is RLSCodeOK or RLSCodeOverLimit.
	Code int
	// RequestsPerUnit and Unit are the limit in force (an RL.OVERRIDE or
	// RL.SCALE applied); RequestsPerUnit -1 and Unit NoUnit when none
	// applies. Name is its rule's name.
	RequestsPerUnit int64
	Unit            policy.Unit
	// Multiplier is how many units the window is (a rule's
	// unit_multiplier; 1 otherwise, 0 with no limit).
	Multiplier int64
	Name       string
	// Remaining is what is left of the limit (4294967295 for an unlimited
	// rule, 0 with no rule).
	Remaining int64
	// ResetSeconds is duration_until_reset (-1: none).
	ResetSeconds int64
	// Shadow: a shadow-mode rule would have refused the descriptor.
	Shadow bool
	// PolicyQuota and PolicyWindow (seconds) are the quota policy the
	// remaining counts against (RateLimit-Policy); -1, 0 when no limit
	// applies.
	PolicyQuota, PolicyWindow int64
}

// HasLimit reports whether a limit applied to the descriptor.
func (s *RLSStatus) HasLimit() bool { return s.RequestsPerUnit >= 0 }

// NoRLSLimit is the status of a descriptor no limit applies to.
var NoRLSLimit = RLSStatus{Code: RLSCodeOK, RequestsPerUnit: -1, ResetSeconds: -1, PolicyQuota: -1}

// WriteRLS writes an RL.SHOULDRATELIMIT reply (a check a coordinator
// decided across groups).
func WriteRLS(w *resp.Writer, refused bool, statuses []RLSStatus) { writeRLS(w, refused, statuses) }

// Uncharged is s, the status of a descriptor its group admitted, as it
// reads when the check was refused (by another group) and so charged
// nothing: what remains is what was there, as a refused check's statuses
// say in one group.
func (s RLSStatus) Uncharged(hits int64) RLSStatus {
	if s.Code == RLSCodeOK && !s.Shadow && s.HasLimit() {
		s.Remaining = min(s.Remaining+max(hits, 0), s.RequestsPerUnit)
	}
	return s
}

// writeRLS writes RL.SHOULDRATELIMIT's reply: the overall code, then each
// status's nine fields.
func writeRLS(w *resp.Writer, refused bool, statuses []RLSStatus) {
	w.Array(1 + len(statuses))
	if refused {
		w.Int(RLSCodeOverLimit)
	} else {
		w.Int(RLSCodeOK)
	}
	for i := range statuses {
		s := &statuses[i]
		w.Array(9)
		w.Int(int64(s.Code))
		w.Int(s.RequestsPerUnit)
		w.BulkString(s.Unit.String())
		w.BulkString(s.Name)
		w.Int(s.Remaining)
		w.Int(s.ResetSeconds)
		w.Int(ReplyFlag(s.Shadow))
		w.Int(s.PolicyQuota)
		w.Int(s.PolicyWindow)
	}
}

const (
	// RLSCodeOK and RLSCodeOverLimit are Envoy's RateLimitResponse codes.
	RLSCodeOK        = 1
	RLSCodeOverLimit = 2
)

// LeaseResult is an RL.LEASE's typed answer.
type LeaseResult struct {
	// Granted is what the holder may admit until TTL (ns) from the
	// grant's instant; it should ask again after Refresh (ns).
	Granted, TTL, Refresh int64
	// Unlimited: no rule limits the bucket (Granted is what was asked,
	// nothing is charged or held). Denied: a rule refuses every unit.
	Unlimited, Denied bool
	// Grant is the id of the grant held (0: none held, or one made below
	// apply level 1): a return that names it (RL.LEASE RETURN … GRANT
	// <id>) ends that grant and no later one.
	Grant int64
}

// ShareResult is an RL.SHARE's typed answer: a token bucket of Burst
// tokens refilling PerFill every Every seconds, for TTL (ns); Gen changes
// whenever the assignment does (a data plane keeps its bucket while it
// does not).
type ShareResult struct {
	Burst, PerFill, Every, TTL, Gen int64
	// Unlimited: no rule limits the bucket. Denied: nothing may be
	// admitted (a rule refuses every unit, or nothing is free now).
	Unlimited, Denied bool
}

// SettleRow is what a settle did to one limit of a reservation: RL.SETTLE's
// reply lists them in the reserve's order (Order).
type SettleRow struct {
	Order                               int
	Name                                string
	Reserved, Actual, Refunded, Charged int64
}

// WriteSettle writes RL.SETTLE's reply: per limit [name, reserved, actual,
// refunded, charged].
func WriteSettle(w *resp.Writer, rows []SettleRow) {
	w.Array(len(rows))
	for _, r := range rows {
		w.Array(5)
		w.BulkString(r.Name)
		w.Int(r.Reserved)
		w.Int(r.Actual)
		w.Int(r.Refunded)
		w.Int(r.Charged)
	}
}

// ReplyFlag is a yes/no answer as Redis' integer reply.
func ReplyFlag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
