// Package commands is sluice's command table: each command parses its
// arguments, runs an algorithm on the keyspace at the instant the server
// gave it, and writes exactly one reply.
//
// Everything that changes state is a deterministic function of the
// arguments and that instant (apply(command, now) → reply), so a replica
// given the same commands and instants reaches the same state. This package
// is also the only place where errors become RESP error text.
package commands
