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
		flushed: func(x *exec) {
			if st := x.m.ruleState.Load(); st != nil {
				x.setRules(st)
			}
		},
		durable: func(m *Machine, d Durability) { m.journalMoves(d) },
	}
}

func decideKinds() []kindRow {
	return []kindRow{
		{kind: keyspace.KindRules, name: "ratelimit-rules", internal: true,
			encode: encodeAs[*RulesState], decode: decodeTo(decodeRules)},
		{kind: keyspace.KindOverride, name: "ratelimit-override", journaled: true, internal: true, kept: true,
			encode: encodeAs[*OverrideState], decode: decodeTo(decodeOverride)},
		{kind: keyspace.KindScale, name: "ratelimit-scale", journaled: true, internal: true, kept: true,
			encode: encodeAs[*ScaleState], decode: decodeTo(decodeScale)},
	}
}
