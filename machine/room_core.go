package machine

import (
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
)

// The core's own commands and kinds: the apply level, keys, the server's
// key commands, DEBUG and transactions (level.go, keys.go, debug.go,
// tx.go).

func coreRoom() roomHooks {
	return roomHooks{
		commands: func(*Machine) []*Command {
			return concat(levelCommands(), keyCommands(), serverKeyCommands(), debugCommands(), txCommands())
		},
		restored: func(m *Machine, _ int64) { m.reloadLevel() },
	}
}

func coreKinds() []kindRow {
	return []kindRow{{Kind: keyspace.KindLevel, Name: "apply-level", Internal: true, Kept: true,
		Encode: room.EncodeAs[*LevelState], Decode: room.DecodeTo(decodeLevel)}}
}

// concat joins command lists.
func concat(lists ...[]*Command) []*Command {
	var all []*Command
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}
