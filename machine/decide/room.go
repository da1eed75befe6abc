package decide

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/limiters"
	"github.com/sluice-rl/sluice/machine/placement"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
	"github.com/sluice-rl/sluice/window"
)

// Exec is an apply as the decide room sees it; the core's apply
// implements it.
type Exec interface {
	// limiters.Exec: a key's lock, the reply, a limiter's decision, an
	// error, a quota's journal, the limiters' scratch (a refund or a
	// forced charge is the limiters').
	limiters.Exec
	// LockSlot is LockKey for a key in slot i.
	LockSlot(i int) (*keyspace.Slot, int64)
	// HoldGroup locks the slots l lists for one decision over several
	// slots: until ReleaseGroup, LockKey and LockSlot return them and
	// Unlock releases nothing. Inside a transaction, which holds them
	// already, it takes nothing and reports false.
	HoldGroup(l *room.SlotLocks) bool
	ReleaseGroup(l *room.SlotLocks, took bool)
	// Instant is the instant to apply at; call it holding a slot lock.
	Instant() int64
	// Outcome is the apply's typed result.
	Outcome() *room.Outcome
	// Changed and Deleted journal a record's new state and its deletion;
	// call them holding the key's slot lock. The reply waits for them.
	Changed(key []byte, kind keyspace.Kind, expireAt int64, obj any)
	Deleted(key []byte)
	// At reports whether the log's apply level is at least l.
	At(l uint32) bool
	// DecideScratch is the room's buffers, reused from one apply to the
	// next.
	DecideScratch() *Scratch
	// Run applies cmd, a command of the machine's table, within this
	// apply (RL.PART's DECIDE and APPLY).
	Run(cmd TableCommand, args [][]byte)
}

// TableCommand is a command of the machine's table, as RL.PART runs one.
type TableCommand interface {
	// ArityOK reports whether n words (the name included) fit its arity.
	ArityOK(n int) bool
	// Check is "" or the error reply args get, without the state.
	Check(args [][]byte) string
	// EveryGroup reports configuration every group applies.
	EveryGroup() bool
}

// Core is what the room reads of its machine outside an apply.
type Core interface {
	// Applied is the instant of the latest write applied; ReadInstant
	// the instant a read at now sees (the later of the two).
	Applied() int64
	ReadInstant(now int64) int64
	// Level is the log's apply level.
	Level() uint32
	// Lookup finds a command of the machine's table by name (nil: none).
	Lookup(name []byte) TableCommand
	// EncodeState and DecodeState are a record's state as snapshots hold
	// it (machine.EncodeState, DecodeState).
	EncodeState(dst []byte, kind keyspace.Kind, obj any) ([]byte, error)
	DecodeState(kind keyspace.Kind, b []byte) (any, error)
	// KindName is TYPE's name for kind.
	KindName(kind keyspace.Kind) string
}

// Durability is where the changes a restore made are journaled
// (machine.Durability).
type Durability interface {
	RecordChanged(key []byte, kind keyspace.Kind, expireAt int64, state []byte) room.Ticket
	QuotaDeleted(key []byte) room.Ticket
}

// Options are what a room is made of.
type Options struct {
	// Core is its machine; Keys the machine's keyspace.
	Core Core
	Keys *keyspace.Keyspace
	// Limiters refund and force a counter's charge (a settle, a lease);
	// Placement says which slots this group owns.
	Limiters  *limiters.Room
	Placement *placement.Room
	// Log says what a restore moved (nil: nothing said).
	Log *slog.Logger
}

// Room is the decisions of one machine: rules, overrides and scales, and
// deciding several limits at one instant — RL.CHECK, RL.CHECKALL,
// RL.SHOULDRATELIMIT, the rule administration, a group's configuration
// given to a migration's target — and the decisions that hold:
// reservations and their settles, leases, and a group's part of a check
// across groups. Its methods call their receiver m, as they did when they
// were the machine's: the code moved without other change.
type Room struct {
	core      Core
	keys      *keyspace.Keyspace
	limiters  *limiters.Room
	placement *placement.Room
	log       *slog.Logger

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
	// reserved, settled and cancelled count RL.RESERVE's reservations by
	// how they ended.
	reserved, settled, cancelled atomic.Int64

	// Faults, set only by tests, make a multi-limit check's n-th store
	// fail (as a full slot or refused memory would) and a sliding log's
	// insert fail after it left its record.
	Faults Faults
}

// Faults are failures tests inject (nil: none).
type Faults struct {
	Store   func(n int) error
	LogMove func() error
}

// ErrOptions: a room's Options lack a part it cannot work without.
var ErrOptions = errors.New("decide: options")

// Validate reports a missing part: every one but Log is needed.
func (o *Options) Validate() error {
	switch {
	case o.Core == nil:
		return fmt.Errorf("%w: no Core", ErrOptions)
	case o.Keys == nil:
		return fmt.Errorf("%w: no Keys", ErrOptions)
	case o.Limiters == nil:
		return fmt.Errorf("%w: no Limiters", ErrOptions)
	case o.Placement == nil:
		return fmt.Errorf("%w: no Placement", ErrOptions)
	}
	return nil
}

// New returns the room of a new machine; o must be valid (Validate): the
// machine makes it, and a room missing a part is a bug there.
func New(o Options) *Room {
	if err := o.Validate(); err != nil {
		panic(err)
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Room{core: o.Core, keys: o.Keys, limiters: o.Limiters, placement: o.Placement, log: log}
}

// Commands are the room's commands.
func (m *Room) Commands() []room.Command[Exec] {
	var all []room.Command[Exec]
	for _, l := range [][]room.Command[Exec]{m.policyCommands(), m.checkAllCommands(), m.policyAdminCommands(),
		m.rlsCommands(), m.configCommands(), m.reserveCommands(), m.leaseCommands(), m.shareCommands(), m.partCommands()} {
		all = append(all, l...)
	}
	return all
}

// Restored reloads what the room mirrors from the keyspace once a restore
// has loaded it (applied is its instant), and moves records kept under
// an older key; d, when set, journals the moves.
func (m *Room) Restored(applied int64, d Durability) {
	m.reloadRules()
	m.moveLegacyRecords(applied, d)
	m.findPolicyRecords()
}

// Flushed puts the rules back after a flush dropped every key.
func (m *Room) Flushed(e Exec) {
	if st := m.ruleState.Load(); st != nil {
		x := m.begin(e)
		x.setRules(st)
	}
}

// Durable journals what a restore moved, once the machine has a durable
// store.
func (m *Room) Durable(d Durability) { m.journalMoves(d) }

// Kinds are the room's kinds of record.
func Kinds() []room.Kind {
	reservation := room.Kind{Inline: true, Internal: true, Encode: room.EncodeAs[*ReservationState], Decode: room.DecodeTo(decodeReservation)}
	return []room.Kind{
		{Kind: keyspace.KindRules, Name: "ratelimit-rules", Internal: true,
			Encode: room.EncodeAs[*RulesState], Decode: room.DecodeTo(decodeRules)},
		{Kind: keyspace.KindOverride, Name: "ratelimit-override", Journaled: true, Internal: true, Kept: true,
			Encode: room.EncodeAs[*OverrideState], Decode: room.DecodeTo(decodeOverride)},
		{Kind: keyspace.KindScale, Name: "ratelimit-scale", Journaled: true, Internal: true, Kept: true,
			Encode: room.EncodeAs[*ScaleState], Decode: room.DecodeTo(decodeScale)},
		with(reservation, keyspace.KindReservation, "ratelimit-reservation"),
		with(reservation, keyspace.KindReservationPart, "ratelimit-reservation-part"),
		with(reservation, keyspace.KindLease, "ratelimit-lease"),
		{Kind: keyspace.KindLeaseDemand, Name: "ratelimit-lease-demand", Internal: true,
			Encode: room.EncodeAs[*LeaseDemand], Decode: room.DecodeTo(decodeLeaseDemand)},
	}
}

// with is r for kind, named Name: kinds that share a state and its
// encoding.
func with(r room.Kind, kind keyspace.Kind, name string) room.Kind {
	r.Kind, r.Name = kind, name
	return r
}

// Rules is the loaded rule set (nil: none). It must not be changed.
func (m *Room) Rules() *RulesState { return m.ruleState.Load() }

// rulesSlots is the slots declaration of RL.RULES: the rules' key.
func rulesSlots([][]byte) ([]int, bool) { return []int{slot.Of([]byte(RulesKey))}, false }

// Scratch is the room's working memory, reused from one apply to the
// next. Nothing an apply returns may alias it.
type Scratch struct {
	// x is the apply as the room's code sees it, made once per command
	// (a nested command of RL.PART remakes it alike).
	x apply
	// logs are one per limit of a multi-limit check (multicheck.go).
	logs []window.LogState
	// undo is a multi-limit check's notes for putting back a partial
	// charge (undo.go).
	undo undoLog
}

// logScratch is the i-th limit's sliding-log scratch.
func (b *Scratch) logScratch(i int) *window.LogState {
	for len(b.logs) <= i {
		b.logs = append(b.logs, window.LogState{})
	}
	return &b.logs[i]
}

// apply is an apply as the room's code uses it: the core's Exec, the
// room, and what the room reaches on every command.
type apply struct {
	Exec
	m    *Room
	w    *resp.Writer
	out  *room.Outcome
	bufs *Scratch
	lim  *limiters.Scratch
}

// begin is e as the room's code sees it.
func (m *Room) begin(e Exec) *apply {
	sc := e.DecideScratch()
	x := &sc.x
	*x = apply{Exec: e, m: m, w: e.Reply(), out: e.Outcome(), bufs: sc, lim: e.Scratch()}
	return x
}

// run is a command's Run from the room's function f.
func (m *Room) run(f func(x *apply, args [][]byte)) func(Exec, [][]byte) {
	return func(e Exec, args [][]byte) { f(m.begin(e), args) }
}

// unowned is the slot of key when this group does not own it, with the
// ownership that says so (ok false: owned, or no map fences this group).
func (m *Room) unowned(key []byte) (s int, o *placement.Ownership, ok bool) {
	o = m.placement.Owned()
	if o == nil {
		return 0, nil, false
	}
	if s = slot.Of(key); o.Owns(s) {
		return 0, nil, false
	}
	return s, o, true
}

// check is a command's Check from the room's function f.
func (m *Room) check(f func(m *Room, args [][]byte) string) func([][]byte) string {
	return func(args [][]byte) string { return f(m, args) }
}

// storeFault is the injected failure of a multi-limit check's n-th store
// (tests); nil in every machine that serves.
func (m *Room) storeFault(n int) error {
	if m.Faults.Store == nil {
		return nil
	}
	return m.Faults.Store(n)
}

// grantKind is the kind of a lease's grant at key, in slot s (held): the
// record's when one is there — a grant made before level 1 is a
// KindReservation — else the one the log's level gives a new grant.
func (x *apply) grantKind(s *keyspace.Slot, key []byte, now int64) keyspace.Kind {
	if e, ok := s.Get(key, now); ok {
		if k := e.Kind(); k == keyspace.KindLease || k == keyspace.KindReservation {
			return k
		}
	}
	if x.At(1) {
		return keyspace.KindLease
	}
	return keyspace.KindReservation
}
