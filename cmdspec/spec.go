// Package cmdspec is what a command is to its clients: its name, arity,
// flags and key positions (which drive dispatch, routing and ACL
// categories) and its COMMAND DOCS text. The server surface (package
// commands) and the state machine (package machine) each keep a table of
// commands; both describe a command with this one type, so COMMAND,
// COMMAND DOCS and COMMAND GETKEYS read every command alike.
package cmdspec

// Spec describes one command.
type Spec struct {
	// Name is the lower-case name ("cl.throttle"); a subcommand's is its
	// own word ("setname").
	Name string
	// Arity follows Redis: n > 0 means exactly n words with the name, n < 0
	// at least -n.
	Arity int
	// Flags are Redis' command flags (write, readonly, fast, denyoom, …).
	// "write" decides whether a machine command's apply moves the applied
	// instant.
	Flags []string
	// FirstKey, LastKey and Step give the key positions (0 when keyless,
	// LastKey -1 for "to the end").
	FirstKey, LastKey, Step int
	// Group, Summary, Since and Complexity are COMMAND DOCS text.
	Group, Summary, Since, Complexity string
	// Args documents the arguments for COMMAND DOCS, in order.
	Args []Arg
	// KeyFlags are the key-spec flags COMMAND reports for the key
	// arguments (RW, UPDATE, ACCESS …); empty derives them from Flags.
	KeyFlags []string
	// Tips are COMMAND's tips ("request_policy:all_shards" …), which
	// cluster clients read to route commands.
	Tips []string
	// ACLCategories are extra categories beyond those Flags and Group
	// imply ("@dangerous" …), with the '@'.
	ACLCategories []string
}

// Arg documents one argument for COMMAND DOCS.
type Arg struct {
	Name string
	// Type is Redis' argument type: key, integer, string, pure-token, oneof …
	Type string
	// Token is the literal word that introduces an option ("COST").
	Token    string
	Optional bool
	// Multiple marks an argument that may repeat.
	Multiple bool
	// Sub are the alternatives of a "oneof" or the parts of a "block".
	Sub []Arg
	// Display is the placeholder help shows for a value argument; empty
	// means Name.
	Display string
}

// HasFlag reports whether the command has flag f.
func (s *Spec) HasFlag(f string) bool {
	for _, g := range s.Flags {
		if g == f {
			return true
		}
	}
	return false
}
