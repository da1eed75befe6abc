package commands

import (
	"encoding/json"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/hot"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/resp"
)

// Every refusal by a limiter command is an event: published on
// sluice:throttled when anyone subscribes, and counted in the most-refused
// keys (THROTTLED.TOP). Both happen after the apply, on the node that
// answered the client (a replicated cluster's leader, not every replica),
// and cost one atomic load and one sketch update when nobody listens.

// HotKeys is the most-refused-keys sketch and the clock it reads.
type HotKeys struct {
	Sketch *hot.Sketch
	// Now is the instant of a refusal, Unix ns (the server's monotonic
	// clock, not the state machine's).
	Now func() int64
}

// throttledEvent is the JSON of a sluice:throttled message.
type throttledEvent struct {
	Command string `json:"command"`
	Key     string `json:"key"`
	Rule    string `json:"rule,omitempty"`
	Limit   int64  `json:"limit"`
	// RetryAfter is seconds until a request like this one would pass; -1
	// when it never can (it costs more than the limit).
	RetryAfter int64 `json:"retry_after"`
}

// refused records one refusal: cmd refused args[1] with the given limit
// and retry_after (seconds), and rule names the RL.CHECK rule ("" else).
func (e *Env) refused(cmd *Command, args [][]byte, limit, retryAfter int64, rule string) {
	if len(args) < 2 {
		return
	}
	key := args[1]
	if cmd.Name == "rl.checkall" && len(args) > 2 {
		// RL.CHECKALL [COST n] LIMIT <key> …: the first limit's key.
		for i := 1; i+1 < len(args); i++ {
			if resp.EqualFold(args[i], "limit") {
				key = args[i+1]
				break
			}
		}
	}
	if e.Hot != nil {
		e.Hot.Sketch.Offer(key, e.Hot.Now())
	}
	if e.PubSub == nil || !e.PubSub.Active() {
		return
	}
	msg, err := json.Marshal(throttledEvent{Command: cmd.Name, Key: string(key), Rule: rule, Limit: limit, RetryAfter: retryAfter})
	if err != nil {
		return
	}
	e.PubSub.Publish(ThrottledChannel, msg)
}

// refusedOutcome records a refusal known from an apply's outcome.
func (e *Env) refusedOutcome(cmd *Command, args [][]byte, out machine.Outcome) {
	rule := ""
	if out.Rule != nil {
		rule = out.Rule.ID()
	}
	e.refused(cmd, args, out.Limit, out.RetryAfter, rule)
}

func hotCommands() []*Command {
	return []*Command{{Spec: cmdspec.Spec{Name: "throttled.top", Arity: -1, Flags: []string{"readonly", "loading", "stale"}, Group: "sluice", Since: "1.1.0",
		Summary:    "Returns the most-refused keys of the recent window: [key, refusals] pairs, most first (estimates; see the README).",
		Complexity: "O(C log C) where C is the sketch's capacity",
		Args:       []Arg{{Name: "count", Type: "integer", Optional: true}}}, Run: runThrottledTop}}
}

// runThrottledTop is THROTTLED.TOP [count] (default 10).
func runThrottledTop(c *Ctx, args [][]byte) {
	n := int64(10)
	if len(args) > 2 {
		c.W.Error(errArity("throttled.top"))
		return
	}
	if len(args) == 2 {
		v, ok := parseInt(args[1])
		if !ok || v < 1 || v > 10000 {
			c.W.Error("ERR count must be an integer in [1, 10000]")
			return
		}
		n = v
	}
	if c.Env.Hot == nil {
		c.W.Array(0)
		return
	}
	top := c.Env.Hot.Sketch.Top(int(n), c.Env.Hot.Now())
	c.W.Array(len(top))
	for _, t := range top {
		c.W.Array(2)
		c.W.BulkString(t.Key)
		c.W.Int(t.Count)
	}
}
