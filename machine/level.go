package machine

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/slot"
)

// Apply levels. What an apply does is replicated state as much as what it
// stores: every member of a group must apply an entry alike. A release
// that changes what an apply does — a record it keeps, a reply, a
// refusal — raises Level and keeps the old behaviour for a log whose level
// is below it. The log's level is raised by SLUICE.LEVEL, which a group's
// leader logs once every member's binary supports the level (it asks
// them: member.Report.Level), as etcd's leader raises its cluster version;
// so a group upgraded member by member applies every entry alike
// throughout, old members and new, and the new behaviour starts at one
// entry on all of them. The level never goes down: a binary older than
// its log's level cannot apply it alike, so a group is not downgraded
// past the release that raised its level.
//
// The levels:
//
//   - 0: sluice 0.4.0, and every log before levels.
//   - 1: a settled or cancelled reservation keeps its id until its ttl (a
//     late copy of its reserve charges nothing); a lease's grant is a
//     record of its own kind (keyspace.KindLease); RL.LEASE reads the
//     domain's RL.SCALE and overrides from the domain's slot; a request's
//     own limit in RL.SHOULDRATELIMIT takes a unit multiplier
//     (<unit>*<n>); a lease's grant has an id (RL.LEASE … WITHGRANT),
//     and a return that names one (RL.LEASE RETURN … GRANT <id>) ends
//     that grant only; RL.SHARE (a lease demand record then carries its
//     holders' assignments); GCRA.
const Level = 1

// LevelKey holds the log's apply level (kind level); absent: 0.
const LevelKey = "sluice:level"

// LevelState is the record under LevelKey.
type LevelState struct{ Level uint32 }

// AppendBinary appends the record's encoding (snapshots, digests).
func (l *LevelState) AppendBinary(dst []byte) []byte {
	return binary.AppendUvarint(dst, uint64(l.Level))
}

// errCorruptLevel: a level record does not decode.
var errCorruptLevel = errors.New("machine: corrupt apply level record")

func decodeLevel(b []byte) (*LevelState, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n != len(b) || v > 1<<31 {
		return nil, errCorruptLevel
	}
	return &LevelState{Level: uint32(v)}, nil
}

// AppliedLevel is the log's apply level (0 before any SLUICE.LEVEL).
func (m *Machine) AppliedLevel() uint32 { return m.level.Load() }

// At reports whether the log's level is at least l: the behaviour of
// level l, else the one before it.
func (x *exec) At(l uint32) bool { return x.m.level.Load() >= l }

func levelCommands() []*Command {
	return []*Command{{
		Spec: cmdspec.Spec{Name: "sluice.level", Arity: 2, Flags: []string{"write", "admin"}, Group: "cluster", Since: "0.5.0", Complexity: "O(1)",
			Summary: "SLUICE.LEVEL <level>: the apply level of this group's log from here on (logged by its leader once every member supports it)."}, internal: true, everyGroup: true,
		slots: func([][]byte) ([]int, bool) { return []int{slot.Of([]byte(LevelKey))}, false },
		run:   runLevel, check: func(args [][]byte) string {
			_, bad := parseLevel(args)
			return bad
		},
	}}
}

func parseLevel(args [][]byte) (uint32, string) {
	v, err := strconv.ParseUint(string(args[1]), 10, 32)
	if err != nil || v == 0 || v > Level {
		return 0, "ERR the apply level must be an integer from 1 to " + strconv.Itoa(Level)
	}
	return uint32(v), ""
}

// runLevel is SLUICE.LEVEL: the level rises to its argument, never falls
// (a lower or equal one is a no-op: a leader's second try).
func runLevel(x *exec, args [][]byte) {
	v, bad := parseLevel(args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	if v <= x.m.level.Load() {
		x.w.OK()
		return
	}
	key := []byte(LevelKey)
	s, now := x.LockKey(key)
	defer x.Unlock(s)
	if e, ok := s.Get(key, now); ok {
		s.Delete(e)
	}
	if _, err := s.Insert(key, keyspace.KindLevel, 0, &LevelState{Level: v}); err != nil {
		x.Error(err)
		return
	}
	x.m.level.Store(v)
	x.w.OK()
}

// SetLevelAlone sets the level of a machine no other member applies (a
// single node: nobody to apply alike with): no record and no change, so
// an empty node stays empty; it is set again at each start.
func (m *Machine) SetLevelAlone(l uint32) {
	if l > m.level.Load() {
		m.level.Store(l)
	}
}

// reloadLevel sets the level from what LevelKey holds (after a restore).
func (m *Machine) reloadLevel() {
	key := []byte(LevelKey)
	s := m.keys.LockKey(key)
	defer s.Unlock()
	var v uint32
	if e, ok := s.Get(key, m.applied.Load()); ok && e.Kind() == keyspace.KindLevel {
		if l, ok := s.Object(e).(*LevelState); ok {
			v = l.Level
		}
	}
	m.level.Store(v)
}
