package decide

import (
	"errors"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/placement"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/slot"
)

// A group that is to serve slots must decide by the rules the cluster
// holds. A group added later (CLUSTER ADDGROUP) has only what its own
// --rules files gave it: before slots move to it, the group moving them
// gives it its configuration — the rules, the overrides, the scales — as
// records (ExportConfig), which SLUICE.CONFIG makes the target's.
//
//	SLUICE.CONFIG <digest> <payload>
//
// The payload is placement.SlotExport's form; the rules replace the target's, its
// overrides and scales are replaced by the payload's.

// configKind reports the kinds of record a group's configuration is.
func configKind(k keyspace.Kind) bool {
	return k == keyspace.KindRules || k == keyspace.KindOverride || k == keyspace.KindScale
}

// ExportConfig is this group's configuration as records live at the
// applied instant.
func (m *Room) ExportConfig() (placement.SlotExport, error) {
	return m.placement.Export([][2]int{{0, slot.Count - 1}}, configKind)
}

// ConfigDigest is the digest of the machine's whole configuration
// (ExportConfig's): equal on two machines exactly when a configuration
// copy would change nothing.
func (m *Room) ConfigDigest() (string, error) {
	exp, err := m.ExportConfig()
	return exp.Digest, err
}

func (m *Room) configCommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "sluice.config", Arity: 3, Flags: []string{"write", "admin", "denyoom"}, Group: "cluster", Since: "1.5.0", Complexity: "O(N) where N is the number of keys",
			Summary: "SLUICE.CONFIG <digest> <payload>: makes another group's configuration (rules, overrides, scales) this group's (sent by a group moving slots here).",
			Args:    []cmdspec.Arg{{Name: "digest", Type: "string"}, {Name: "payload", Type: "string"}}}, Slots: room.AllSlots, FromMember: true,
		Run: m.run(runConfig),
		Check: func(args [][]byte) string {
			_, _, bad := m.parseConfig(args)
			return bad
		},
	}}
}

// parseConfig reads SLUICE.CONFIG's records, each decoded.
func (m *Room) parseConfig(args [][]byte) ([]placement.Record, []any, string) {
	if placement.PayloadDigest(args[2]) != string(args[1]) {
		return nil, nil, "ERR the payload's digest is not " + string(args[1])
	}
	var records []placement.Record
	var objs []any
	rules := 0
	err := placement.WalkPayload(args[2], func(r placement.Record) error {
		if !configKind(r.Kind) {
			return errors.New("a record of kind " + m.core.KindName(r.Kind) + " is not configuration")
		}
		if r.Kind == keyspace.KindRules {
			if string(r.Key) != RulesKey || rules > 0 {
				return errors.New("one rules record, at " + RulesKey)
			}
			rules++
		}
		obj, err := m.core.DecodeState(r.Kind, r.State)
		if err != nil {
			return err
		}
		records = append(records, r)
		objs = append(objs, obj)
		return nil
	})
	if err != nil {
		return nil, nil, "ERR bad SLUICE.CONFIG payload: " + err.Error()
	}
	return records, objs, ""
}

// runConfig is SLUICE.CONFIG: the rules become the payload's (none if it
// has none), and the overrides and scales.
func runConfig(x *apply, args [][]byte) {
	records, objs, bad := x.m.parseConfig(args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	// This group's overrides and scales go: the payload's replace them.
	var drop [][]byte
	for i := range slot.Count {
		s, now := x.LockSlot(i)
		if s.Len() > 0 {
			s.Keys(now, func(key []byte, e keyspace.Entry) bool {
				if k := e.Kind(); k == keyspace.KindOverride || k == keyspace.KindScale {
					drop = append(drop, append([]byte(nil), key...))
				}
				return true
			})
		}
		x.Unlock(s)
	}
	for _, key := range drop {
		s, now := x.LockKey(key)
		if e, ok := s.Get(key, now); ok {
			s.Delete(e)
			x.Deleted(key)
		}
		x.Unlock(s)
	}
	var rules *RulesState
	for i, r := range records {
		if r.Kind == keyspace.KindRules {
			rules = objs[i].(*RulesState)
			continue
		}
		s, _ := x.LockKey(r.Key)
		_, err := s.Insert(r.Key, r.Kind, r.Word, objs[i])
		if err == nil {
			x.Changed(r.Key, r.Kind, r.Word, objs[i])
			x.m.policyRecords.Store(true)
		}
		x.Unlock(s)
		if err != nil {
			x.Error(err)
			return
		}
	}
	x.setRules(rules)
	x.w.OK()
}
