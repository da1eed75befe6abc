package room

import "github.com/sluice-rl/sluice/cmdspec"

// Command is a command a room declares, X being the room's view of an
// apply (an interface the core's apply implements). The core adds it to
// its table.
type Command[X any] struct {
	cmdspec.Spec
	// Decides marks the limiter commands: their reply is a decision,
	// allowed or limited (metrics count both).
	Decides bool
	// Journaled marks commands whose changes are written through to the
	// durable store.
	Journaled bool
	// Run applies the command.
	Run func(x X, args [][]byte)
	// Check parses args as Run does and returns the error reply a
	// malformed command gets, or "": what can be known without the state.
	// nil: nothing to check beyond the arity.
	Check func(args [][]byte) string
	// Stores, when set, says whether an apply could add or grow a record
	// (what maxmemory refuses); nil: it stores when one of its keys holds
	// no record.
	Stores func(keys View, args [][]byte, now int64) bool
	// Slots, for a command whose records are not (only) at its key
	// arguments' slots, names the slots its apply locks, all of them when
	// all is set. nil: the slots of its keys.
	Slots func(args [][]byte) (slots []int, all bool)
	// Keys, for a command whose keys are not at fixed positions
	// (movablekeys), finds their indexes in args (COMMAND GETKEYS).
	Keys func(args [][]byte) []int
	// Route, when set, is the key a call is routed by when it is not its
	// first (RL.LEASE's counter, which the machine's rules name): nil from
	// it falls back to the first.
	Route func(args [][]byte) []byte
	// Subcommands are the lower-case subcommand words, when the command
	// has them (they name it in an internal error: "rl.rules|list").
	Subcommands []string
	// Internal commands are not part of the server surface; FromMember
	// ones only members send each other (the member channel carries
	// them; they are fenced as any command); EveryGroup ones are
	// configuration every group of a sharded cluster applies (not
	// fenced).
	Internal, FromMember, EveryGroup bool
}

// View reads the keyspace outside an apply.
type View interface {
	// Exists reports whether key holds a live record at now.
	Exists(key []byte, now int64) bool
}

// AllSlots is the Slots of a command that may touch any slot.
func AllSlots([][]byte) ([]int, bool) { return nil, true }

// AlwaysStores is the Stores of a command that adds a record each time (a
// reservation, an override, a lease in a CONC key's table, an import).
func AlwaysStores(View, [][]byte, int64) bool { return true }
