package machine

import (
	"sync/atomic"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
)

// The placement room: which slots this group owns (the fence), slot jobs
// and moves, the groups of a sharded cluster, the configuration copy and
// the typed placement requests (fence.go, slotjobs.go, slotmove.go,
// groups.go, config_copy.go, placement.go, redirect.go).

// placementState is what the placement room mirrors of its records.
type placementState struct {
	// owned mirrors OwnershipKey: the slots this group owns (nil: all;
	// fence.go).
	owned atomic.Pointer[Ownership]
	// groups mirrors GroupsKey: the groups added to or removed from a
	// running sharded cluster (nil: none).
	groups atomic.Pointer[GroupList]
}

func placementRoom() roomHooks {
	return roomHooks{
		commands: func(*Machine) []*Command {
			return concat(fenceCommands(), slotMoveCommands(), configCommands(), groupCommands())
		},
		restored: func(m *Machine, _ int64) {
			m.reloadOwnership()
			m.reloadGroups()
		},
		flushed: func(x *exec) {
			if o := x.m.placement.owned.Load(); o != nil {
				x.setOwnership(o)
			}
			if l := x.m.placement.groups.Load(); l != nil {
				s, _ := x.LockKey([]byte(GroupsKey))
				x.setGroups(s, l)
				x.Unlock(s)
			}
		},
	}
}

func placementKinds() []kindRow {
	return []kindRow{
		{Kind: keyspace.KindOwnership, Name: "slot-ownership", Internal: true,
			Encode: room.EncodeAs[*Ownership], Decode: room.DecodeTo(decodeOwnership)},
		{Kind: keyspace.KindGroups, Name: "cluster-groups", Internal: true,
			Encode: room.EncodeAs[*GroupList], Decode: room.DecodeTo(decodeGroupList)},
	}
}
