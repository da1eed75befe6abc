package machine

import "github.com/sluice-rl/sluice/machine/placement"

// The placement room (machine/placement) as the machine's callers see it:
// which slots the group owns, its slot migrations, the groups of a sharded
// cluster, and the records of slots as a payload.

// Ownership is the slots a group owns at an epoch.
type Ownership = placement.Ownership

// OwnershipKey holds the slots this group owns.
const OwnershipKey = placement.OwnershipKey

// GroupList and GroupSpec are the groups added to or removed from a
// running sharded cluster, held under GroupsKey.
type (
	GroupList = placement.GroupList
	GroupSpec = placement.GroupSpec
)

// GroupsKey holds the group list.
const GroupsKey = placement.GroupsKey

// Job is one of a group's slot migrations; its State is one of the Job*
// states.
type Job = placement.Job

// A job's states.
const (
	JobRunning   = placement.JobRunning
	JobSuccess   = placement.JobSuccess
	JobFailed    = placement.JobFailed
	JobCancelled = placement.JobCancelled
)

// NewJobID is a fresh job name (made outside the log).
func NewJobID() string { return placement.NewJobID() }

// SlotExport is the movable records of some slots, as SLUICE.IMPORT takes
// them.
type SlotExport = placement.SlotExport

// StaleEpochError is an import refused at an epoch the group has passed;
// it wraps ErrStaleEpoch.
type StaleEpochError = placement.StaleEpochError

// ErrStaleEpoch and ErrExport: see package placement.
var (
	ErrStaleEpoch = placement.ErrStaleEpoch
	ErrExport     = placement.ErrExport
)

// OwnsSlot reports whether this group's log gives it slot s (false before
// any map: a router asks it only in a sharded cluster).
func (m *Machine) OwnsSlot(s int) bool {
	o := m.placement.Owned()
	return o != nil && o.Owns(s)
}

// Owned is the slots this group owns (nil: every slot).
func (m *Machine) Owned() *Ownership { return m.placement.Owned() }

// Groups is the group list this group's log holds (nil: none).
func (m *Machine) Groups() *GroupList { return m.placement.Groups() }

// ExportSlots reads the movable records of ranges live at the applied
// instant. Read it after the chunk's cut applied: then nothing changes it.
func (m *Machine) ExportSlots(ranges [][2]int) (SlotExport, error) {
	return m.placement.ExportSlots(ranges)
}

// DigestSlots is the digest of the movable records of slots from to to
// (DEBUG DIGEST-SLOTS) and their count.
func (m *Machine) DigestSlots(from, to int) (string, int, error) {
	return m.placement.DigestSlots(from, to)
}
