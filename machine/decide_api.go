package machine

import (
	"github.com/sluice-rl/sluice/machine/decide"
	"github.com/sluice-rl/sluice/machine/placement"
)

// What callers outside the machine use of the decide room
// (machine/decide), under the names they have always used.

type (
	HeldLimit         = decide.HeldLimit
	HolderDemand      = decide.HolderDemand
	LeaseDemand       = decide.LeaseDemand
	OverrideState     = decide.OverrideState
	PartError         = decide.PartError
	PartKind          = decide.PartKind
	PartRequest       = decide.PartRequest
	PartResult        = decide.PartResult
	ReservationCounts = decide.ReservationCounts
	ReservationState  = decide.ReservationState
	RuleFile          = decide.RuleFile
	RulesState        = decide.RulesState
	ScaleState        = decide.ScaleState
	SplitDescriptor   = decide.SplitDescriptor
)

const (
	DefaultRecovery    = decide.DefaultRecovery
	MaxLeaseKeyBytes   = decide.MaxLeaseKeyBytes
	MaxLeaseValueBytes = decide.MaxLeaseValueBytes
	NoRules            = decide.NoRules
	RulesKey           = decide.RulesKey
	ScaleUnit          = decide.ScaleUnit
	PartCancel         = decide.PartCancel
	PartDecide         = decide.PartDecide
	PartHold           = decide.PartHold
	PartReserve        = decide.PartReserve
	PartSettle         = decide.PartSettle
)

// The decide room's errors (see there).
var (
	ErrBadPart       = decide.ErrBadPart
	ErrCorruptPolicy = decide.ErrCorruptPolicy
	ErrHeldElsewhere = decide.ErrHeldElsewhere
	ErrHeldOther     = decide.ErrHeldOther
	ErrPartLate      = decide.ErrPartLate
	ErrRulesDiffer   = decide.ErrRulesDiffer
)

// FilesDigestOf is decide.FilesDigestOf.
func FilesDigestOf(files []RuleFile) [32]byte { return decide.FilesDigestOf(files) }

// FormatFactor is decide.FormatFactor.
func FormatFactor(v int64) string { return decide.FormatFactor(v) }

// HeldWithOtherArgs is decide.HeldWithOtherArgs.
func HeldWithOtherArgs(id []byte) string { return decide.HeldWithOtherArgs(id) }

// ParseRules is decide.ParseRules.
func ParseRules(files []RuleFile) (*RulesState, error) { return decide.ParseRules(files) }

// PartOf is decide.PartOf.
func PartOf(kind PartKind, out Outcome) (PartResult, error) { return decide.PartOf(kind, out) }

// ReserveArgsSum is decide.ReserveArgsSum.
func ReserveArgsSum(words [][]byte) uint64 { return decide.ReserveArgsSum(words) }

// Scale is decide.Scale.
func Scale(n, factor int64) int64 { return decide.Scale(n, factor) }

// SettledID is decide.SettledID.
func SettledID(id []byte) string { return decide.SettledID(id) }

// Rules is the loaded rule set (nil: none). It must not be changed.
func (m *Machine) Rules() *RulesState { return m.decide.Rules() }

// RulesDigest is decide.Room.RulesDigest.
func (m *Machine) RulesDigest(domain string) string { return m.decide.RulesDigest(domain) }

// Reservations counts the reservations (RL.RESERVE) by how they ended.
func (m *Machine) Reservations() ReservationCounts { return m.decide.Reservations() }

// ExportConfig is decide.Room.ExportConfig.
func (m *Machine) ExportConfig() (placement.SlotExport, error) { return m.decide.ExportConfig() }

// ConfigDigest is decide.Room.ConfigDigest.
func (m *Machine) ConfigDigest() (string, error) { return m.decide.ConfigDigest() }

// Split is decide.Room.Split.
func (m *Machine) Split(args [][]byte, buf []SplitDescriptor) (head [][]byte, descs []SplitDescriptor, bad string) {
	return m.decide.Split(args, buf)
}

// DomainOverrides is decide.Room.DomainOverrides.
func (m *Machine) DomainOverrides(domain string, now int64) []*OverrideState {
	return m.decide.DomainOverrides(domain, now)
}

// DomainScale is decide.Room.DomainScale.
func (m *Machine) DomainScale(domain string, now int64) (factor, target int64) {
	return m.decide.DomainScale(domain, now)
}

// HeldSlots is decide.Room.HeldSlots.
func (m *Machine) HeldSlots(domain string, id []byte) (slots []int, ok bool) {
	return m.decide.HeldSlots(domain, id)
}

// HeldReserve is decide.Room.HeldReserve.
func (m *Machine) HeldReserve(domain string, id []byte) (reply CheckResult, args uint64, ok bool) {
	return m.decide.HeldReserve(domain, id)
}

// MaxLeaseHolders is decide.MaxLeaseHolders.
const MaxLeaseHolders = decide.MaxLeaseHolders
