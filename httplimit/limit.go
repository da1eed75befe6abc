package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/redis/go-redis/v9"
)

// Doer is the part of a go-redis client the middleware uses: *redis.Client,
// *redis.ClusterClient and redis.UniversalClient all satisfy it.
type Doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// A Limit is the sluice command that decides one request.
type Limit interface {
	// Validate reports a limit sluice would refuse, before any request.
	Validate() error
	// Check asks sluice whether r, whose limiter key is key, may pass.
	Check(ctx context.Context, c Doer, r *http.Request, key string) (Decision, error)
}

// A Releaser is a Limit that holds something for as long as the handler
// runs (a concurrency lease): Release is called once the handler returned,
// for every request Check allowed.
type Releaser interface {
	Limit
	Release(ctx context.Context, c Doer, key string, d Decision) error
}

// Decision is one limiter reply: [limited, limit, remaining, retry_after,
// reset_after] (README "The limiter reply"), and the policy it applies.
type Decision struct {
	// Limited reports that the request was refused.
	Limited bool
	// Limit is the most units the key admits (GCRA: max_burst + 1).
	Limit int64
	// Remaining is how many units could still pass now.
	Remaining int64
	// RetryAfter is whole seconds until a request like this one would pass;
	// -1 when allowed, or when it can never pass. It may be 0 on a refusal.
	RetryAfter int64
	// ResetAfter is whole seconds until the key is back to empty.
	ResetAfter int64
	// Policy is what RateLimit-Policy advertises for this decision.
	Policy Policy

	// lease is the request id a concurrency limit released after the
	// handler (a Reserve's reservation id); reserved is what a Reserve
	// reserved, and outcome what its handler reported.
	lease    string
	reserved int64
	outcome  handlerOutcome
}

// Policy is one quota policy as draft-ietf-httpapi-ratelimit-headers-10
// describes it.
type Policy struct {
	// Name identifies the policy in both fields; empty means Config.Name.
	Name string
	// Quota is the "q" parameter: units allowed per Window.
	Quota int64
	// Window is the "w" parameter in whole seconds; 0 leaves it out (a
	// concurrency limit, or calendar periods of varying length).
	Window int64
	// Unit is the "qu" parameter; empty leaves it out (the default unit,
	// "requests").
	Unit string
}

// Errors a Check or Release can return besides the client's own.
var (
	// ErrInvalidLimit wraps every Limit.Validate failure.
	ErrInvalidLimit = errors.New("httplimit: invalid limit")
	// ErrBadReply is a sluice reply that is not a limiter reply: the
	// server is not sluice, or not a version that has this command.
	ErrBadReply = errors.New("httplimit: unexpected reply")
)

// check sends one limiter command and decodes its reply.
func check(ctx context.Context, c Doer, args ...any) (Decision, error) {
	v, err := c.Do(ctx, args...).Result()
	if err != nil {
		return Decision{}, err
	}
	return decode(v)
}

// decode reads the five integers of a limiter reply. Extra elements (the
// rule name and window RL.CHECK appends) are ignored here.
func decode(v any) (Decision, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 5 {
		return Decision{}, fmt.Errorf("%w: %v", ErrBadReply, v)
	}
	var n [5]int64
	for i := range n {
		x, ok := arr[i].(int64)
		if !ok {
			return Decision{}, fmt.Errorf("%w: element %d of %v is not an integer", ErrBadReply, i, v)
		}
		n[i] = x
	}
	if n[0] != 0 && n[0] != 1 {
		return Decision{}, fmt.Errorf("%w: limited is %d", ErrBadReply, n[0])
	}
	return Decision{Limited: n[0] == 1, Limit: n[1], Remaining: n[2], RetryAfter: n[3], ResetAfter: n[4]}, nil
}
