package placement

import (
	"sync/atomic"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/resp"
)

// Exec is one command's apply as this room sees it; the core's apply
// (package machine) implements it.
type Exec interface {
	// LockKey locks key's slot, LockSlot slot i, and return it with the
	// instant to apply at. Release it with Unlock.
	LockKey(key []byte) (*keyspace.Slot, int64)
	LockSlot(i int) (*keyspace.Slot, int64)
	Unlock(s *keyspace.Slot)
	// Reply is where the command's reply is written.
	Reply() *resp.Writer
	// Error answers an error from the keyspace; Fail the error reply of a
	// command that was wrong.
	Error(err error)
	Fail(msg string)
	// Refuse answers msg, an error members act on: why is the outcome's
	// Refusal.
	Refuse(why error, msg string)
	// Failed reports whether the apply has answered an error.
	Failed() bool
	// Deleted journals key's deletion, QuotaChanged a quota's new state;
	// call them holding the key's slot lock. The reply waits for them.
	Deleted(key []byte)
	QuotaChanged(key []byte, st *quota.State)
}

// Core is what the room reads of its machine outside an apply: the
// keyspace, the applied instant, and what each kind of record means (the
// core's table of every room's kinds).
type Core interface {
	Store() *keyspace.Keyspace
	Applied() int64
	// AppendState, DecodeState and StoreState move a record's state as
	// snapshots do (machine.AppendState, DecodeState, StoreState).
	AppendState(dst []byte, s *keyspace.Slot, e keyspace.Entry) ([]byte, error)
	DecodeState(kind keyspace.Kind, b []byte) (any, error)
	StoreState(s *keyspace.Slot, key []byte, kind keyspace.Kind, word int64, obj any) error
	// KindName is TYPE's name for kind; Journaled whether its changes
	// are written through to the durable store.
	KindName(kind keyspace.Kind) string
	Journaled(kind keyspace.Kind) bool
}

// Room is the placement of one machine: which slots its group owns at
// which epoch (the fence the core applies by), its slot migrations, and
// the groups of a sharded cluster.
type Room struct {
	core Core
	// owned mirrors OwnershipKey: the slots this group owns (nil: all).
	owned atomic.Pointer[Ownership]
	// groups mirrors GroupsKey: the groups added to or removed from a
	// running sharded cluster (nil: none).
	groups atomic.Pointer[GroupList]
}

// New returns the room of a new machine.
func New(core Core) *Room { return &Room{core: core} }

// Owned is the slots this group owns (nil: every slot).
func (r *Room) Owned() *Ownership { return r.owned.Load() }

// Groups is the groups added to or removed from a running cluster (nil:
// none).
func (r *Room) Groups() *GroupList { return r.groups.Load() }

// Commands are the room's commands.
func (r *Room) Commands() []room.Command[Exec] {
	var all []room.Command[Exec]
	for _, l := range [][]room.Command[Exec]{r.ownCommands(), r.slotMoveCommands(), r.groupCommands()} {
		all = append(all, l...)
	}
	return all
}

// Restored reloads what the room mirrors, once a restore has loaded the
// keyspace.
func (r *Room) Restored() {
	r.reloadOwnership()
	r.reloadGroups()
}

// Flushed puts back the ownership and the groups a flush dropped: they
// are configuration, not data.
func (r *Room) Flushed(x Exec) {
	if o := r.owned.Load(); o != nil {
		r.setOwnership(x, o)
	}
	if l := r.groups.Load(); l != nil {
		s, now := x.LockKey([]byte(GroupsKey))
		r.setGroups(x, s, now, l)
		x.Unlock(s)
	}
}

// Kinds are the kinds of record the room keeps.
func Kinds() []room.Kind {
	return []room.Kind{
		{Kind: keyspace.KindOwnership, Name: "slot-ownership", Internal: true,
			Encode: room.EncodeAs[*Ownership], Decode: room.DecodeTo(decodeOwnership)},
		{Kind: keyspace.KindGroups, Name: "cluster-groups", Internal: true,
			Encode: room.EncodeAs[*GroupList], Decode: room.DecodeTo(decodeGroupList)},
	}
}
