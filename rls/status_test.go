package rls

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/sluice-rl/sluice/machine"
)

// A call's gRPC code is picked by why it got no decision, as whoever
// answered typed it — never by the reply's text, which may read like
// another reason; one that says no reason (a member of an older version)
// may have been charged: UNKNOWN.
func TestStatusByReason(t *testing.T) {
	for _, tc := range []struct {
		reason machine.Reason
		msg    string
		want   codes.Code
	}{
		{machine.ReasonInvalid, "ERR the outcome is unknown (a word of the text)", codes.InvalidArgument},
		{machine.ReasonWrongType, "WRONGTYPE Operation against a key holding the wrong kind of value", codes.Internal},
		{machine.ReasonInternal, "ERR internal error in rl.shouldratelimit", codes.Internal},
		{machine.ReasonNotNow, "ERR quota changes cannot be written", codes.Unavailable},
		{machine.ReasonRulesDiffer, "ERR the groups hold different rules", codes.FailedPrecondition},
		{machine.ReasonOutOfMemory, "OOM command not allowed when used memory > 'maxmemory'.", codes.ResourceExhausted},
		{machine.ReasonUnknown, "ERR syntax error", codes.Unknown},
		{machine.ReasonNone, "OOM command not allowed when used memory > 'maxmemory'.", codes.Unknown},
	} {
		if got := errorStatus(errReply{tc.msg, tc.reason}).Code(); got != tc.want {
			t.Errorf("%v %q: %v, want %v", tc.reason, tc.msg, got, tc.want)
		}
	}
	if got := errorStatus(errReply{"ERR COST must not be negative", machine.ReasonInvalid}).Message(); got != "sluice: COST must not be negative" {
		t.Errorf("an invalid request's message: %q", got)
	}
}
