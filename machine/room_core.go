package machine

import "github.com/sluice-rl/sluice/keyspace"

// The core's own commands and kinds: the apply level, keys, the server's
// key commands, DEBUG and transactions (level.go, keys.go, debug.go,
// tx.go).

func coreRoom() room {
	return room{
		commands: func(*Machine) []*Command {
			return concat(levelCommands(), keyCommands(), serverKeyCommands(), debugCommands(), txCommands())
		},
		restored: func(m *Machine, _ int64) { m.reloadLevel() },
	}
}

func coreKinds() []kindRow {
	return []kindRow{{kind: keyspace.KindLevel, name: "apply-level", internal: true, kept: true,
		encode: encodeAs[*LevelState], decode: decodeTo(decodeLevel)}}
}

// concat joins command lists.
func concat(lists ...[]*Command) []*Command {
	var all []*Command
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}
