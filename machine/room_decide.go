package machine

import "github.com/sluice-rl/sluice/keyspace"

// The decide room: rules, overrides and scales, and deciding several limits
// at one instant — RL.CHECK, RL.CHECKALL, RL.SHOULDRATELIMIT and the rule
// administration (policy*.go, rls.go, decide.go, checkall.go, result.go,
// multicheck.go, migrate.go).

func decideRoom() room {
	return room{
		commands: func(*Machine) []*Command {
			return concat(policyCommands(), checkAllCommands(), policyAdminCommands(), rlsCommands())
		},
		restored: func(m *Machine, applied int64) {
			m.reloadRules()
			m.moveLegacyRecords(applied)
			m.findPolicyRecords()
		},
		durable: func(m *Machine, d Durability) { m.journalMoves(d) },
	}
}

func decideKinds() []kindRow {
	return []kindRow{
		{kind: keyspace.KindRules, name: "ratelimit-rules",
			encode: encodeAs[*RulesState], decode: decodeTo(decodeRules)},
		{kind: keyspace.KindOverride, name: "ratelimit-override", journaled: true,
			encode: encodeAs[*OverrideState], decode: decodeTo(decodeOverride)},
		{kind: keyspace.KindScale, name: "ratelimit-scale", journaled: true,
			encode: encodeAs[*ScaleState], decode: decodeTo(decodeScale)},
	}
}
