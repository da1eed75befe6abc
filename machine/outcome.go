package machine

import (
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
)

// An apply's Outcome and the typed results it carries are the rooms'
// contract with the core and the doors (machine/room); these are their
// names here.

type (
	// Outcome is what an apply tells its caller besides the reply.
	Outcome = room.Outcome
	// CheckResult is RL.CHECK's and RL.CHECKALL's answer.
	CheckResult = room.CheckResult
	// RLSStatus is one descriptor's status in an RL.SHOULDRATELIMIT.
	RLSStatus = room.RLSStatus
	// LeaseResult is an RL.LEASE's typed answer.
	LeaseResult = room.LeaseResult
	// ShareResult is an RL.SHARE's typed answer.
	ShareResult = room.ShareResult
	// SettleRow is what a settle did to one limit of a reservation.
	SettleRow = room.SettleRow
)

// Envoy's RateLimitResponse codes.
const (
	RLSCodeOK        = room.RLSCodeOK
	RLSCodeOverLimit = room.RLSCodeOverLimit
)

// WriteCheck writes r as RL.CHECK's seven-element reply.
func WriteCheck(w *resp.Writer, r CheckResult) { room.WriteCheck(w, r) }

// WriteRLS writes an RL.SHOULDRATELIMIT reply.
func WriteRLS(w *resp.Writer, refused bool, statuses []RLSStatus) {
	room.WriteRLS(w, refused, statuses)
}

// WriteSettle writes RL.SETTLE's reply.
func WriteSettle(w *resp.Writer, rows []SettleRow) { room.WriteSettle(w, rows) }
