package room

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-rl/sluice/keyspace"
)

type tryAgain string

func (e tryAgain) Error() string      { return string(e) }
func (e tryAgain) WholeReply() string { return string(e) }

func TestErrorReply(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("gcra: zero rates are not allowed"), "ERR zero rates are not allowed"},
		{errors.New("a message with: a colon"), "ERR a message with: a colon"},
		{fmt.Errorf("store: %w", keyspace.ErrWrongType), "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{fmt.Errorf("check: %w", tryAgain("TRYAGAIN slot 7 is not this group's")), "TRYAGAIN slot 7 is not this group's"},
	} {
		if got := ErrorReply(c.err); got != c.want {
			t.Errorf("ErrorReply(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestReasonString(t *testing.T) {
	if got := ReasonRulesDiffer.String(); got != "rules-differ" {
		t.Errorf("ReasonRulesDiffer = %q", got)
	}
	if got := Reason(200).String(); got != "reason(200)" {
		t.Errorf("Reason(200) = %q", got)
	}
}
