package machine

import (
	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/resp"
)

// DEBUG APPLY-PANIC <key> is the test of the apply boundary (recover.go):
// a write that goes through the log like any other, changes key's slot,
// then panics inside the apply. The server surface sends it only when
// debugging commands are enabled; it is internal to the machine, so
// COMMAND lists the surface's DEBUG, not this one.

func debugCommands() []*Command {
	return []*Command{{
		Spec: cmdspec.Spec{Name: "debug", Arity: 3, Flags: []string{"write", "admin"},
			FirstKey: 2, LastKey: 2, Step: 1,
			Group: "server", Since: "1.2.0", Complexity: "O(1)",
			Summary: "APPLY-PANIC <key>: sets key, then panics inside the apply (tests the apply boundary)."}, subcommands: []string{"apply-panic"},
		internal: true,
		run:      runDebugApplyPanic,
		check:    checkDebug,
	}}
}

// debugPanicValue is what DEBUG APPLY-PANIC panics with.
const debugPanicValue = "machine: DEBUG APPLY-PANIC (a deliberate panic after changing the slot)"

func checkDebug(args [][]byte) string {
	if !resp.EqualFold(args[1], "apply-panic") {
		return "ERR unknown subcommand '" + resp.Clip(args[1], 64) + "'. Try APPLY-PANIC."
	}
	return ""
}

// runDebugApplyPanic stores key as a CL.THROTTLE key whose TAT is a minute
// after the applied instant — a change every replica makes alike — and
// panics while still holding the slot.
func runDebugApplyPanic(x *exec, args [][]byte) {
	if bad := checkDebug(args); bad != "" {
		x.Fail(bad)
		return
	}
	key := args[2]
	s, now := x.LockKey(key)
	tat := now + 60_000_000_000
	if e, found := s.Get(key, now); found {
		s.Delete(e)
	}
	if _, err := s.Insert(key, keyspace.KindGCRA, tat, nil); err != nil {
		x.Unlock(s)
		x.Error(err)
		return
	}
	x.w.Array(1) // a partial reply, which the boundary must drop
	panic(debugPanicValue)
}
