package placement

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// The groups of a running sharded cluster beyond its map file: added by
// CLUSTER ADDGROUP, removed by CLUSTER REMOVEGROUP. Like the rules, every
// group's log holds the list (SLUICE.GROUPS is applied in one group, then
// in every other), so every member learns a new group from its own state
// machine, and a member joining later reads the list from any member.

// GroupsKey holds the list (kind groups).
const GroupsKey = "sluice:groups"

// GroupList is the groups added to or removed from the cluster, in the
// order of their changes.
type GroupList struct {
	Groups []GroupSpec
}

// GroupSpec is one added or removed group.
type GroupSpec struct {
	ID string
	// Members are "<member-id>=<client-addr>@<raft-addr>", as given.
	Members []string
	// Removed is set once the group is removed; an id is never reused.
	Removed bool
}

func (l *GroupList) find(id string) int {
	for i := range l.Groups {
		if l.Groups[i].ID == id {
			return i
		}
	}
	return -1
}

// AppendBinary appends the list's encoding.
func (l *GroupList) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(l.Groups)))
	str := func(s string) {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	for _, g := range l.Groups {
		str(g.ID)
		removed := byte(0)
		if g.Removed {
			removed = 1
		}
		dst = append(dst, removed)
		dst = binary.AppendUvarint(dst, uint64(len(g.Members)))
		for _, m := range g.Members {
			str(m)
		}
	}
	return dst
}

var errCorruptGroups = errors.New("placement: corrupt group list record")

func decodeGroupList(b []byte) (*GroupList, error) {
	d := room.Reader{B: b}
	n := d.Uvarint(1 << 16)
	l := &GroupList{}
	for range n {
		var g GroupSpec
		g.ID = string(d.Bytes())
		if d.Bad || len(d.B) == 0 {
			return nil, errCorruptGroups
		}
		g.Removed = d.B[0] == 1
		d.B = d.B[1:]
		members := d.Uvarint(1 << 16)
		for range members {
			g.Members = append(g.Members, string(d.Bytes()))
		}
		if d.Bad {
			return nil, errCorruptGroups
		}
		l.Groups = append(l.Groups, g)
	}
	if d.Bad || len(d.B) != 0 {
		return nil, errCorruptGroups
	}
	return l, nil
}

func (r *Room) groupCommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "sluice.groups", Arity: -3, Flags: []string{"write", "admin"}, Group: "cluster", Since: "1.4.0", Complexity: "O(G) where G is the number of groups",
			Summary: "SLUICE.GROUPS ADD <id> <member-id>=<client-addr>@<raft-addr> … | DEL <id>: groups added to or removed from a running cluster."}, Internal: true, EveryGroup: true,
		Slots: func([][]byte) ([]int, bool) { return []int{slot.Of([]byte(GroupsKey))}, false },
		Run:   r.runGroups, Check: checkGroups,
	}}
}

func checkGroups(args [][]byte) string {
	id := string(args[2])
	if id == "" || strings.ContainsAny(id, " \t\r\n") {
		return "ERR a group id is a word"
	}
	switch {
	case resp.EqualFold(args[1], "add") && len(args) >= 4:
		for _, a := range args[3:] {
			mid, addrs, ok := strings.Cut(string(a), "=")
			client, raft, ok2 := strings.Cut(addrs, "@")
			if !ok || !ok2 || mid == "" || client == "" || raft == "" || strings.ContainsAny(string(a), " \t\r\n") {
				return "ERR a member is <member-id>=<client-addr>@<raft-addr>"
			}
		}
		return ""
	case resp.EqualFold(args[1], "del") && len(args) == 3:
		return ""
	}
	return "ERR SLUICE.GROUPS takes ADD <id> <member-id>=<client-addr>@<raft-addr> … or DEL <id>"
}

// runGroups is SLUICE.GROUPS: an add of the same group again, or a removal
// of a removed one, is a no-op (it is applied in every group, and sent
// again when one did not take it).
func (r *Room) runGroups(x Exec, args [][]byte) {
	if bad := checkGroups(args); bad != "" {
		x.Fail(bad)
		return
	}
	key := []byte(GroupsKey)
	s, now := x.LockKey(key)
	defer x.Unlock(s)
	next := &GroupList{}
	if cur := r.groups.Load(); cur != nil {
		next.Groups = slices.Clone(cur.Groups)
	}
	id := string(args[2])
	i := next.find(id)
	if resp.EqualFold(args[1], "add") {
		members := make([]string, 0, len(args)-3)
		for _, a := range args[3:] {
			members = append(members, string(a))
		}
		switch {
		case i >= 0 && next.Groups[i].Removed:
			x.Fail("ERR group " + id + " was removed: a group id is not used again")
			return
		case i >= 0 && slices.Equal(next.Groups[i].Members, members):
			x.Reply().OK()
			return
		case i >= 0:
			x.Fail("ERR group " + id + " exists with other members")
			return
		}
		next.Groups = append(next.Groups, GroupSpec{ID: id, Members: members})
	} else {
		switch {
		case i >= 0 && next.Groups[i].Removed:
			x.Reply().OK()
			return
		case i >= 0:
			next.Groups[i].Removed = true
		default:
			next.Groups = append(next.Groups, GroupSpec{ID: id, Removed: true}) // a group of the map file
		}
	}
	r.setGroups(x, s, now, next)
	x.Reply().OK()
}

// setGroups stores l under GroupsKey (whose slot the caller holds).
func (r *Room) setGroups(x Exec, s *keyspace.Slot, now int64, l *GroupList) {
	key := []byte(GroupsKey)
	if e, ok := s.Get(key, now); ok {
		s.Delete(e)
	}
	if _, err := s.Insert(key, keyspace.KindGroups, 0, l); err != nil {
		x.Error(err)
		return
	}
	r.groups.Store(l)
}

// reloadGroups points groups at what GroupsKey holds (after a restore).
func (r *Room) reloadGroups() {
	key := []byte(GroupsKey)
	s := r.core.Store().LockKey(key)
	defer s.Unlock()
	var l *GroupList
	if e, ok := s.Get(key, r.core.Applied()); ok && e.Kind() == keyspace.KindGroups {
		l, _ = s.Object(e).(*GroupList)
	}
	r.groups.Store(l)
}
