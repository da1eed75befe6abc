package policy

import (
	"errors"
	"strconv"
)

// Sentinel errors. Every error from Parse, LoadFiles and LoadDir is an
// *Error that wraps one of them, so callers test with errors.Is and print
// Error() as is ("file:line: problem").
var (
	// ErrSyntax: the file is not YAML, holds more than one document, or
	// uses YAML features the format has no use for (aliases, merge keys,
	// non-scalar mapping keys).
	ErrSyntax = errors.New("policy: syntax error")
	// ErrTooLarge: the file is longer than Limits.MaxFileBytes, or holds
	// more than Limits.MaxRules rate limits.
	ErrTooLarge = errors.New("policy: file too large")
	// ErrTooDeep: descriptors nest deeper than Limits.MaxDepth, or YAML
	// nodes deeper than Limits.MaxYAMLDepth.
	ErrTooDeep = errors.New("policy: nesting too deep")
	// ErrDuplicateKey: a YAML mapping names the same key twice.
	ErrDuplicateKey = errors.New("policy: duplicate key")
	// ErrUnknownField: a field the format does not define at that place.
	ErrUnknownField = errors.New("policy: unknown field")
	// ErrInvalid: a field has the wrong type or a value out of range
	// (empty domain or key, bad unit, negative or huge limit, bad duration,
	// unknown algorithm or zone, a field that does not apply to the
	// algorithm, a missing required field).
	ErrInvalid = errors.New("policy: invalid value")
	// ErrDuplicateDescriptor: two sibling descriptors with the same key and
	// value (or the same key and no value).
	ErrDuplicateDescriptor = errors.New("policy: duplicate descriptor")
	// ErrDuplicateDomain: two files define the same domain.
	ErrDuplicateDomain = errors.New("policy: duplicate domain")
	// ErrRead: a file or directory could not be read.
	ErrRead = errors.New("policy: read error")
)

// Error is a problem in one rule file, located as precisely as known
// (Line 0: the whole file).
type Error struct {
	File    string
	Line    int
	Problem string
	Err     error // one of the sentinels above
}

func (e *Error) Error() string {
	s := e.File
	if e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
	}
	return s + ": " + e.Problem
}

func (e *Error) Unwrap() error { return e.Err }
