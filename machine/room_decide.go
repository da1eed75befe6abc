package machine

import (
	"sync"
	"sync/atomic"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/slot"
)

// The decide room: rules, overrides and scales, and deciding several limits
// at one instant — RL.CHECK, RL.CHECKALL, RL.SHOULDRATELIMIT and the rule
// administration (policy*.go, rls.go, decide.go, checkall.go, result.go,
// multicheck.go, migrate.go, config_copy.go: SLUICE.CONFIG, a group's
// configuration given to a migration's target).

// decideState is what the decide room keeps beside the keyspace.
type decideState struct {
	// ruleState mirrors the value of RulesKey (nil: no rules), so RL.CHECK
	// finds the rules without locking that key's slot. Only applies that
	// change RulesKey, and Restore, set it.
	ruleState atomic.Pointer[RulesState]
	// policyRecords is set once an override or scale record may exist:
	// until then RL.CHECK skips looking for them. It never goes back to
	// false; it only saves lookups that would find nothing, and changes no
	// reply.
	policyRecords atomic.Bool
	// plans pools the decision core's working memory (*plan, decide.go).
	plans sync.Pool
	// moved are the records Restore moved to a new key, to journal once
	// the machine has a durable store (migrate.go).
	moved []movedRecord
}

func decideRoom() roomHooks {
	return roomHooks{
		commands: func(*Machine) []*Command {
			return concat(policyCommands(), checkAllCommands(), policyAdminCommands(), rlsCommands(), configCommands())
		},
		restored: func(m *Machine, applied int64) {
			m.reloadRules()
			m.moveLegacyRecords(applied)
			m.findPolicyRecords()
		},
		flushed: func(x *exec) {
			if st := x.m.decide.ruleState.Load(); st != nil {
				x.setRules(st)
			}
		},
		durable: func(m *Machine, d Durability) { m.journalMoves(d) },
	}
}

func decideKinds() []kindRow {
	return []kindRow{
		{Kind: keyspace.KindRules, Name: "ratelimit-rules", Internal: true,
			Encode: room.EncodeAs[*RulesState], Decode: room.DecodeTo(decodeRules)},
		{Kind: keyspace.KindOverride, Name: "ratelimit-override", Journaled: true, Internal: true, Kept: true,
			Encode: room.EncodeAs[*OverrideState], Decode: room.DecodeTo(decodeOverride)},
		{Kind: keyspace.KindScale, Name: "ratelimit-scale", Journaled: true, Internal: true, Kept: true,
			Encode: room.EncodeAs[*ScaleState], Decode: room.DecodeTo(decodeScale)},
	}
}

// Rules is the loaded rule set (nil: none). It must not be changed.
func (m *Machine) Rules() *RulesState { return m.decide.ruleState.Load() }

// rulesSlots is the slots declaration of RL.RULES: the rules' key.
func rulesSlots([][]byte) ([]int, bool) { return []int{slot.Of([]byte(RulesKey))}, false }
