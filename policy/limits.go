package policy

import "errors"

// Limits bound what a rule file may make the parser do, so a hostile or
// broken file gets an error instead of exhausting memory or stack.
type Limits struct {
	// MaxFileBytes is the longest file accepted (default 1 MiB; envoy
	// files are a few KB).
	MaxFileBytes int
	// MaxDepth is the deepest descriptor nesting (default 16). Matching
	// walks one level per entry, so it also bounds a match.
	MaxDepth int
	// MaxYAMLDepth bounds the nesting of any YAML node, metadata included
	// (default 64).
	MaxYAMLDepth int
	// MaxRules is the most rate_limit blocks in one file (default 100000).
	MaxRules int
}

// DefaultLimits are the limits Parse, LoadFiles and LoadDir use.
func DefaultLimits() Limits {
	return Limits{MaxFileBytes: 1 << 20, MaxDepth: 16, MaxYAMLDepth: 64, MaxRules: 100_000}
}

// Validate reports a limit that is not positive, or a YAML depth too small
// to hold MaxDepth descriptor levels (each level takes two YAML nodes, a
// rate_limit block up to five more).
func (l Limits) Validate() error {
	if l.MaxFileBytes <= 0 || l.MaxDepth <= 0 || l.MaxYAMLDepth <= 0 || l.MaxRules <= 0 {
		return errors.New("policy: limits must be positive")
	}
	if l.MaxYAMLDepth < 2*l.MaxDepth+5 {
		return errors.New("policy: MaxYAMLDepth must be at least 2×MaxDepth+5")
	}
	return nil
}
