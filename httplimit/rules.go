package httplimit

import (
	"context"
	"fmt"
	"net/http"
)

// Entry is one key/value pair of an RL.CHECK descriptor.
type Entry struct{ Key, Value string }

// Rules is RL.CHECK: the server's rules for Domain (its --rules files)
// decide, on the descriptors Descriptors builds for the request; every
// matched limit is charged or none is. The policy the headers advertise is
// the binding rule's (its name and window, from the reply). A request no
// rule matches is not limited and carries no rate-limit headers.
type Rules struct {
	// Domain is the rules' domain.
	Domain string
	// Descriptors returns the request's descriptors (each one or more
	// entries), given the key Config.Key returned. Nil or empty: the
	// request is not limited.
	Descriptors func(r *http.Request, key string) [][]Entry
	// Cost is the units each request takes from every matched limit; 0
	// means 1.
	Cost int64
}

// Validate checks the domain, the descriptor function and the cost.
func (l Rules) Validate() error {
	if l.Domain == "" {
		return fmt.Errorf("%w: rules need a domain", ErrInvalidLimit)
	}
	if l.Descriptors == nil {
		return fmt.Errorf("%w: rules need a Descriptors function", ErrInvalidLimit)
	}
	return validCost(l.Cost)
}

// Check sends RL.CHECK domain COST cost DESCRIPTOR k v … [DESCRIPTOR …].
func (l Rules) Check(ctx context.Context, c Doer, r *http.Request, key string) (Decision, error) {
	args, ok := appendDescriptors([]any{"RL.CHECK", l.Domain, "COST", cost(l.Cost)}, l.Descriptors(r, key))
	if !ok {
		return Decision{Limit: -1, RetryAfter: -1}, nil
	}
	return checkRules(ctx, c, args...)
}

// appendDescriptors appends DESCRIPTOR k v … for each non-empty
// descriptor, and reports whether there was one.
func appendDescriptors(args []any, descs [][]Entry) ([]any, bool) {
	n := len(args)
	for _, d := range descs {
		if len(d) == 0 {
			continue
		}
		args = append(args, "DESCRIPTOR")
		for _, e := range d {
			args = append(args, e.Key, e.Value)
		}
	}
	return args, len(args) > n
}

// checkRules sends an RL.CHECK-shaped command and decodes its reply, the
// policy from the binding rule's name and window.
func checkRules(ctx context.Context, c Doer, args ...any) (Decision, error) {
	v, err := c.Do(ctx, args...).Result()
	if err != nil {
		return Decision{}, err
	}
	d, err := decode(v)
	if err != nil {
		return d, err
	}
	arr := v.([]any)
	if len(arr) != 7 {
		return Decision{}, fmt.Errorf("%w: %s reply has %d elements, want 7", ErrBadReply, args[0], len(arr))
	}
	name, _ := arr[5].(string)
	window, _ := arr[6].(int64)
	d.Policy = Policy{Name: name, Quota: d.Limit, Window: window}
	return d, nil
}
