// Package policy reads rule files — envoyproxy/ratelimit's YAML, with
// sluice's extensions under `sluice:` — and answers, for a request's
// descriptor, which rule limits it and under which counter key. It holds
// no state and decides nothing: a Rule gives the parameters its algorithm
// package takes (GCRALimit, WindowParams, ConcParams, QuotaSchedule), and
// the machine applies them.
//
// Its rooms:
//
//   - parse.go, limits.go, errors.go: Parse (and Limits.Parse, bounded so a
//     hostile file is an error, not an exhausted process) turns one file into
//     a Domain; every error is an *Error ("file:line: problem") wrapping a
//     sentinel.
//   - rule.go: Rule, Algorithm, Unit — one limit as parsed, and what it
//     hands the algorithms; Rule.Equal says whether a reload changed it.
//   - match.go, replaces.go: Domain.Match walks the descriptor tree as envoy
//     does (the exact key and value, then wildcard values in file order,
//     then the key without a value); ApplyReplaces drops the rules others
//     in the same request replace.
//   - key.go: a matched rule's counter key (length-prefixed, hash-tagged so
//     counters spread over the slots, or tagged by a shard_key's value).
//   - set.go: Set, the domains loaded together (LoadFiles, LoadDir), one
//     per name.
//
// The keys are part of the data format: a counter written by one version
// must be found by the next (key_test.go checks their form; records of an
// older form are moved by LegacyDomainKey's callers).
package policy
