package keyspace

// Kind says what a key holds. A command used on a key of another kind is
// answered with WRONGTYPE. What each kind means (its TYPE name, its
// encoding) is the state machine's: see package machine's kinds.go.
type Kind uint8

// The kinds of value a key can hold. Their numbers are written in snapshots:
// never renumber them.
const (
	KindNone Kind = iota
	// KindGCRA is a CL.THROTTLE key: its word is the theoretical arrival
	// time, which is also the instant the key expires.
	KindGCRA
	// KindSlidingCounter is an SW.CHECK key in counter mode.
	KindSlidingCounter
	// KindSlidingLog is an SW.CHECK EXACT key.
	KindSlidingLog
	// KindFixedWindow is an FW.CHECK key.
	KindFixedWindow
	// KindLeases is a CONC.* key.
	KindLeases
	// KindQuota is a QUOTA.* key.
	KindQuota
	// KindRules is the loaded rule set of RL.CHECK (one key, see package
	// machine's policy files).
	KindRules
	// KindOverride is an RL.OVERRIDE: a run-time limit for one descriptor.
	KindOverride
	// KindScale is an RL.SCALE: a domain's adaptive scale factor.
	KindScale
	// KindReservation is an RL.RESERVE held until it is settled.
	KindReservation
	// KindOwnership is the slots a group of a sharded cluster owns (one
	// key, see package machine's fencing).
	KindOwnership
	// KindGroups is the groups added to or removed from a running sharded
	// cluster (one key, see package machine's groups.go).
	KindGroups
	// KindReservationPart is the share of a reservation held in one slot:
	// the limits whose counters are there, so it moves with them. The
	// reservation itself (KindReservation, in its domain's slot) lists the
	// slots of its parts.
	KindReservationPart
	// KindLeaseDemand is what the holders of one RL.LEASE bucket last
	// asked for, by which the bucket's limit is shared among them.
	KindLeaseDemand
	// KindLease is an RL.LEASE's grant: a reservation held by a holder for
	// a bucket (the same record as KindReservation's, counted apart).
	KindLease
	// KindLevel is the apply level of a group's log (one key, see package
	// machine's levels).
	KindLevel
	kindCount
)

// MaxKinds bounds the kinds there can be (counts per kind are arrays of
// it).
const MaxKinds = 17

var _ [MaxKinds - kindCount]struct{} // kindCount ≤ MaxKinds

// Valid reports whether k is a kind a key can hold.
func (k Kind) Valid() bool { return k > KindNone && k < kindCount }
