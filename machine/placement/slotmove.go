package placement

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// Moving slots between groups. A chunk of slots changes group at two
// points, one in each group's log:
//
//  1. the cut, in the source's log (SLUICE.CUT): the source stops owning
//     the chunk, at a new epoch, and the job records the chunk as pending.
//     From here the source refuses the chunk (TRYAGAIN), and its records
//     there no longer change: the export read after the cut is the
//     chunk's final state, the same however often it is read.
//  2. the import, in the target's log (SLUICE.IMPORT): the records, their
//     digest checked, and ownership of the chunk at an epoch above the
//     target's, in one apply. A repeat of an applied import is a no-op; an
//     import at an epoch the target has passed is refused, so a stale copy
//     of one never revives a chunk that moved on.
//
// Then the source logs SLUICE.MOVED: the pending chunk is done and its
// records there are dropped. Between 1 and 2 no group decides for the
// chunk; never two.

// ErrExport: a chunk's records could not be read for export.
var ErrExport = errors.New("placement: slot export")

// movable reports whether records of kind move with their slot: the
// limiters' counters, and the reservations held on them (each part is in
// its counters' slot, the head in its domain's). Rules, overrides, scale
// and the ownership record are configuration every group keeps.
func movable(k keyspace.Kind) bool {
	switch k {
	case keyspace.KindGCRA, keyspace.KindSlidingCounter, keyspace.KindSlidingLog,
		keyspace.KindFixedWindow, keyspace.KindLeases, keyspace.KindQuota,
		keyspace.KindReservation, keyspace.KindReservationPart, keyspace.KindLeaseDemand, keyspace.KindLease:
		return true
	}
	return false
}

// SlotExport is the movable records of some slots, as SLUICE.IMPORT takes
// them.
type SlotExport struct {
	// Payload is the records: per record its kind (1 byte), key
	// (uvarint length, bytes), word (8 bytes, little-endian) and state
	// (uvarint length, EncodeState bytes); slot by slot, keys in order.
	Payload []byte
	// Keys is the number of records.
	Keys int
	// Digest is the payload's (40 hex characters).
	Digest string
}

// ExportSlots reads the movable records of ranges live at the applied
// instant. Read it after the chunk's cut applied: then nothing changes it.
func (r *Room) ExportSlots(ranges [][2]int) (SlotExport, error) { return r.Export(ranges, movable) }

// Export reads the records of ranges whose kind keep reports, live at the
// applied instant.
func (r *Room) Export(ranges [][2]int, keep func(keyspace.Kind) bool) (SlotExport, error) {
	applied := r.core.Applied()
	var out SlotExport
	var err error
	for _, rg := range ranges {
		for i := rg[0]; i <= rg[1] && err == nil; i++ {
			s := r.core.Store().Lock(i)
			if s.Len() > 0 {
				s.Keys(applied, func(key []byte, e keyspace.Entry) bool {
					if keep(e.Kind()) {
						err = out.add(r.core, s, key, e)
					}
					return err == nil
				})
			}
			s.Unlock()
		}
	}
	out.Digest = PayloadDigest(out.Payload)
	return out, err
}

// add appends the record e at key of s to the export.
func (out *SlotExport) add(core Core, s *keyspace.Slot, key []byte, e keyspace.Entry) error {
	out.Payload = append(out.Payload, byte(e.Kind()))
	out.Payload = binary.AppendUvarint(out.Payload, uint64(len(key)))
	out.Payload = append(out.Payload, key...)
	out.Payload = binary.LittleEndian.AppendUint64(out.Payload, uint64(s.Word(e)))
	state, err := core.AppendState(nil, s, e)
	if err != nil {
		return errors.Join(ErrExport, err)
	}
	out.Payload = binary.AppendUvarint(out.Payload, uint64(len(state)))
	out.Payload = append(out.Payload, state...)
	out.Keys++
	return nil
}

// DigestSlots is the digest of the movable records of slots from to to
// (DEBUG DIGEST-SLOTS) and their count: equal on two machines exactly
// when they hold the same counters there, whatever else they hold.
func (r *Room) DigestSlots(from, to int) (string, int, error) {
	e, err := r.ExportSlots([][2]int{{from, to}})
	return e.Digest, e.Keys, err
}

// PayloadDigest is the digest a payload travels with.
func PayloadDigest(p []byte) string {
	sum := sha256.Sum256(p)
	return hex.EncodeToString(sum[:20])
}

// Record is one record of a payload.
type Record struct {
	Kind  keyspace.Kind
	Key   []byte
	Word  int64
	State []byte
}

// WalkPayload calls fn for each record of p; a payload that does not
// decode is an error.
func WalkPayload(p []byte, fn func(r Record) error) error {
	d := room.Reader{B: p}
	for len(d.B) > 0 {
		var r Record
		r.Kind = keyspace.Kind(d.B[0])
		d.B = d.B[1:]
		r.Key = d.Bytes()
		if d.Bad || len(d.B) < 8 {
			return errBadPayload
		}
		r.Word = int64(binary.LittleEndian.Uint64(d.B))
		d.B = d.B[8:]
		r.State = d.Bytes()
		if d.Bad {
			return errBadPayload
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

var errBadPayload = errors.New("the payload does not decode")

func (r *Room) slotMoveCommands() []room.Command[Exec] {
	return []room.Command[Exec]{
		{Spec: cmdspec.Spec{Name: "sluice.import", Arity: -5, Flags: []string{"write", "admin", "denyoom"}, Group: "cluster", Since: "1.4.0", Complexity: "O(N) where N is the number of records",
			Summary: "SLUICE.IMPORT <epoch> <digest> <payload> <from-to> …: takes slots moved from another group, their records and ownership at epoch (sent by the group moving them).",
			Args: []cmdspec.Arg{{Name: "epoch", Type: "integer"}, {Name: "digest", Type: "string"}, {Name: "payload", Type: "string"},
				{Name: "range", Type: "string", Multiple: true}}}, Stores: room.AlwaysStores, Slots: room.AllSlots, FromMember: true,
			Run: r.runImport, Check: func(args [][]byte) string { _, bad := r.parseImport(args); return bad }},
		{Spec: cmdspec.Spec{Name: "sluice.cut", Arity: -4, Flags: []string{"write", "admin"}, Group: "cluster", Since: "1.4.0", Complexity: "O(R)",
			Summary: "SLUICE.CUT <job> <epoch> <from-to> …: this group stops owning a chunk of a migration."}, Slots: ownershipSlots, Internal: true,
			Run: r.runCut, Check: func(args [][]byte) string { _, _, bad := parseOwn(args[1:]); return bad }},
		{Spec: cmdspec.Spec{Name: "sluice.moved", Arity: -4, Flags: []string{"write", "admin"}, Group: "cluster", Since: "1.4.0", Complexity: "O(N) where N is the number of records moved",
			Summary: "SLUICE.MOVED <job> <keys> <bytes> [<show-until-ms>]: the pending chunk of a migration was imported; its records here are dropped. A job this ends is shown as before until show-until-ms (Unix ms)."}, Slots: room.AllSlots, Internal: true,
			Run: r.runMoved, Check: checkMoved},
		{Spec: cmdspec.Spec{Name: "sluice.job", Arity: -2, Flags: []string{"write", "admin"}, Group: "cluster", Since: "1.4.0", Complexity: "O(J) where J is the number of jobs",
			Summary: "SLUICE.JOB ADD <id> <target-group> <source-node> <target-node> <from-to> … | END <id> <state> [<show-until-ms>] [message] | CANCEL [<show-until-ms>]: a group's migration jobs; a job ended is shown as before until show-until-ms (Unix ms)."}, Slots: ownershipSlots, Internal: true,
			Run: r.runJob, Check: checkJob},
	}
}

// importArgs is SLUICE.IMPORT parsed.
type importArgs struct {
	epoch   uint64
	records []Record
	objs    []any
	ranges  [][2]int
}

func (r *Room) parseImport(args [][]byte) (importArgs, string) {
	var a importArgs
	epoch, ranges, bad := parseOwn(append([][]byte{args[0], args[1]}, args[4:]...))
	if bad != "" {
		return a, bad
	}
	a.epoch, a.ranges = epoch, ranges
	if PayloadDigest(args[3]) != string(args[2]) {
		return a, "ERR the payload's digest is not " + resp.Clip(args[2], 40)
	}
	bits := bitsOf(ranges)
	err := WalkPayload(args[3], func(rec Record) error {
		if !movable(rec.Kind) {
			return errors.New("a record of kind " + r.core.KindName(rec.Kind) + " does not move")
		}
		if !bits.has(slot.Of(rec.Key)) {
			return errors.New("key '" + resp.Clip(rec.Key, 32) + "' is outside the ranges")
		}
		obj, err := r.core.DecodeState(rec.Kind, rec.State)
		if err != nil {
			return err
		}
		a.records = append(a.records, rec)
		a.objs = append(a.objs, obj)
		return nil
	})
	if err != nil {
		return a, "ERR bad SLUICE.IMPORT payload: " + err.Error()
	}
	return a, ""
}

// ErrStaleEpoch: an import at an epoch the target group has passed; the
// source cuts the chunk again above the target's epoch. Nothing was
// imported.
var ErrStaleEpoch = errors.New("placement: the group is past the import's epoch")

// StaleEpochError is an import refused at an epoch the group has passed:
// Epoch is the group's; Reply the error reply, for people.
type StaleEpochError struct {
	Epoch uint64
	Reply string
}

func (e *StaleEpochError) Error() string { return e.Reply }
func (e *StaleEpochError) Unwrap() error { return ErrStaleEpoch }

// runImport is SLUICE.IMPORT.
func (r *Room) runImport(x Exec, args [][]byte) {
	a, bad := r.parseImport(args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	cur := r.owned.Load()
	if cur == nil {
		x.Fail("ERR this group fences by no cluster map: it cannot import slots")
		return
	}
	if cur.Epoch >= a.epoch {
		if cur.bits.hasAll(a.ranges) {
			x.Reply().OK() // applied before: a repeat
			return
		}
		stale := &StaleEpochError{Epoch: cur.Epoch, Reply: "STALEEPOCH " + strconv.FormatUint(cur.Epoch, 10) +
			" this group is past the import's epoch " + strconv.FormatUint(a.epoch, 10)}
		x.Refuse(stale, stale.Reply)
		return
	}
	if cur.bits.hasAny(a.ranges) {
		x.Fail("ERR this group already owns some of the slots imported")
		return
	}
	r.dropMovable(x, a.ranges) // leftovers of an earlier stay here
	for i, rec := range a.records {
		s, _ := x.LockKey(rec.Key)
		err := r.core.StoreState(s, rec.Key, rec.Kind, rec.Word, a.objs[i])
		if err == nil && rec.Kind == keyspace.KindQuota {
			x.QuotaChanged(rec.Key, a.objs[i].(*quota.State))
		}
		x.Unlock(s)
		if err != nil {
			x.Error(err)
			return
		}
	}
	r.updateOwnership(x, func(cur *Ownership, _ int64) (*Ownership, string) {
		bits := cur.bits
		bits.add(a.ranges)
		return cur.with(a.epoch, bits), ""
	})
}

// dropMovable deletes the movable records of ranges (journaling quota
// deletions).
func (r *Room) dropMovable(x Exec, ranges [][2]int) {
	var keys [][]byte
	for _, rg := range ranges {
		for i := rg[0]; i <= rg[1]; i++ {
			s, now := x.LockSlot(i)
			if s.Len() == 0 {
				x.Unlock(s)
				continue
			}
			keys = keys[:0]
			s.Keys(now, func(key []byte, e keyspace.Entry) bool {
				if movable(e.Kind()) {
					keys = append(keys, bytes.Clone(key))
				}
				return true
			})
			for _, k := range keys {
				if e, ok := s.Get(k, now); ok {
					if r.core.Journaled(e.Kind()) {
						x.Deleted(k)
					}
					s.Delete(e)
				}
			}
			x.Unlock(s)
		}
	}
}

// updateOwnership changes the ownership record under its slot's lock: fn
// gets the current one (never nil here) and the instant, and returns the
// next or an error reply.
func (r *Room) updateOwnership(x Exec, fn func(cur *Ownership, now int64) (*Ownership, string)) {
	key := []byte(OwnershipKey)
	s, now := x.LockKey(key)
	cur := r.owned.Load()
	if cur == nil {
		x.Unlock(s)
		x.Fail("ERR this group fences by no cluster map")
		return
	}
	next, bad := fn(cur, now)
	x.Unlock(s)
	if bad != "" {
		x.Fail(bad)
		return
	}
	next.trimJobs()
	r.setOwnership(x, next)
	if !x.Failed() {
		x.Reply().OK()
	}
}

// runCut is SLUICE.CUT <job> <epoch> <ranges>: the chunk leaves this
// group at epoch. Cutting the pending chunk again at a later epoch only
// raises the epoch (the target had passed the first one).
func (r *Room) runCut(x Exec, args [][]byte) {
	epoch, ranges, bad := parseOwn(args[1:])
	if bad != "" {
		x.Fail(bad)
		return
	}
	id := string(args[1])
	r.updateOwnership(x, func(cur *Ownership, now int64) (*Ownership, string) {
		i, ok := cur.job(id)
		if !ok {
			return nil, "ERR no slot migration named " + resp.Clip(args[1], 40)
		}
		if epoch <= cur.Epoch {
			return nil, "ERR the cut's epoch must be above the group's (" + strconv.FormatUint(cur.Epoch, 10) + ")"
		}
		j := cur.Jobs[i]
		bits := cur.bits
		switch {
		case j.Pending != nil && bitsOf(j.Pending) == bitsOf(ranges):
		case j.Pending != nil:
			return nil, "ERR the migration has a chunk in flight"
		case j.State != JobRunning || j.Cancel:
			return nil, "ERR the migration is " + j.State
		case !bits.hasAll(ranges) || !bitsOf(j.Remaining()).hasAll(ranges):
			return nil, "ERR the chunk is not this migration's to cut"
		default:
			bits.remove(ranges)
			j.Pending = ranges
		}
		j.PendingEpoch, j.Updated = epoch, now
		next := cur.with(epoch, bits)
		next.Jobs[i] = j
		return next, ""
	})
}

func checkMoved(args [][]byte) string {
	if len(args) > 5 {
		return "ERR SLUICE.MOVED takes <job> <keys> <bytes> [<show-until-ms>]"
	}
	for _, a := range args[2:] {
		if _, err := strconv.ParseUint(string(a), 10, 64); err != nil {
			return "ERR keys, bytes and show-until-ms must be non-negative integers"
		}
	}
	return ""
}

// showUntil reads a show-until-ms argument: a Unix ms instant, as a
// non-negative integer.
func showUntil(a []byte) (int64, bool) {
	v, err := strconv.ParseInt(string(a), 10, 64)
	return v, err == nil && v >= 0
}

// jobEndArgs splits SLUICE.JOB END's tail (after the state) into its
// show-until instant and message. The instant came later than the
// message, in front of it: a tail of one word is the instant when it is
// a number (the driver's messages never are).
func jobEndArgs(tail [][]byte) (until int64, msg string) {
	if len(tail) > 0 {
		if v, ok := showUntil(tail[0]); ok {
			until, tail = v, tail[1:]
		}
	}
	if len(tail) > 0 {
		msg = string(tail[0])
	}
	return until, msg
}

// checkJob checks SLUICE.JOB's shape before it enters the log.
func checkJob(args [][]byte) string {
	switch {
	case resp.EqualFold(args[1], "add") && len(args) >= 7:
	case resp.EqualFold(args[1], "end") && len(args) >= 4 && len(args) <= 6:
		if len(args) == 6 {
			if _, ok := showUntil(args[4]); !ok {
				return "ERR show-until-ms must be a non-negative integer"
			}
		}
	case resp.EqualFold(args[1], "cancel") && len(args) <= 3:
		if len(args) == 3 {
			if _, ok := showUntil(args[2]); !ok {
				return "ERR show-until-ms must be a non-negative integer"
			}
		}
	default:
		return jobSyntax
	}
	return ""
}

const jobSyntax = "ERR SLUICE.JOB takes ADD <id> <target-group> <source-node> <target-node> <from-to> …, END <id> <state> [<show-until-ms>] [message] or CANCEL [<show-until-ms>]"

// runMoved is SLUICE.MOVED <job> <keys> <bytes>: the pending chunk is in
// the target group; its records here go. Without a pending chunk it is a
// repeat: a no-op.
func (r *Room) runMoved(x Exec, args [][]byte) {
	cur := r.owned.Load()
	if cur == nil {
		x.Fail("ERR this group fences by no cluster map")
		return
	}
	i, ok := cur.job(string(args[1]))
	if !ok {
		x.Fail("ERR no slot migration named " + resp.Clip(args[1], 40))
		return
	}
	if cur.Jobs[i].Pending == nil {
		x.Reply().OK()
		return
	}
	r.dropMovable(x, cur.Jobs[i].Pending)
	keys, _ := strconv.ParseUint(string(args[2]), 10, 64)
	size, _ := strconv.ParseUint(string(args[3]), 10, 64)
	var until int64
	if len(args) == 5 {
		until, _ = showUntil(args[4])
	}
	r.updateOwnership(x, func(cur *Ownership, now int64) (*Ownership, string) {
		next := cur.with(cur.Epoch, cur.bits)
		j := &next.Jobs[i]
		var done slotBits
		done.add(j.Done)
		done.add(j.Pending)
		j.Done, j.Pending, j.PendingEpoch = done.ranges(), nil, 0
		j.Keys += keys
		j.Bytes += size
		j.Updated = now
		switch {
		case len(j.Remaining()) == 0:
			j.State, j.Ended, j.ShowUntil = JobSuccess, now, until
		case j.Cancel:
			j.State, j.Ended, j.ShowUntil = JobCancelled, now, until
		}
		return next, ""
	})
}

// runJob is SLUICE.JOB ADD | END | CANCEL.
func (r *Room) runJob(x Exec, args [][]byte) {
	switch {
	case resp.EqualFold(args[1], "add") && len(args) >= 7:
		id, target, src, dst := string(args[2]), string(args[3]), string(args[4]), string(args[5])
		_, ranges, bad := parseOwn(append([][]byte{nil, []byte("1")}, args[6:]...))
		if bad != "" {
			x.Fail(bad)
			return
		}
		r.updateOwnership(x, func(cur *Ownership, now int64) (*Ownership, string) {
			if _, dup := cur.job(id); dup {
				return nil, "ERR a slot migration named " + id + " exists"
			}
			if !cur.bits.hasAll(ranges) {
				return nil, "ERR some of the slots are not this group's"
			}
			for _, j := range cur.Jobs {
				if j.State == JobRunning && bitsOf(j.Remaining()).hasAny(ranges) {
					return nil, "ERR some of the slots are already migrating (" + j.ID + ")"
				}
			}
			next := cur.with(cur.Epoch, cur.bits)
			next.Jobs = append(next.Jobs, Job{ID: id, TargetGroup: target, SourceNode: src, TargetNode: dst,
				State: JobRunning, Ranges: bitsOf(ranges).ranges(), Created: now, Updated: now})
			return next, ""
		})
	case resp.EqualFold(args[1], "end") && len(args) >= 4 && len(args) <= 6:
		state := string(args[3])
		until, msg := jobEndArgs(args[4:])
		if state != JobSuccess && state != JobFailed && state != JobCancelled {
			x.Fail("ERR a job ends in success, failed or cancelled")
			return
		}
		r.updateOwnership(x, func(cur *Ownership, now int64) (*Ownership, string) {
			i, ok := cur.job(string(args[2]))
			if !ok {
				return nil, "ERR no slot migration named " + resp.Clip(args[2], 40)
			}
			if cur.Jobs[i].Pending != nil {
				return nil, "ERR the migration has a chunk in flight"
			}
			next := cur.with(cur.Epoch, cur.bits)
			j := &next.Jobs[i]
			if j.State == JobRunning {
				j.State, j.Ended, j.Updated, j.ShowUntil, j.Message = state, now, now, until, msg
			}
			return next, ""
		})
	case resp.EqualFold(args[1], "cancel") && len(args) <= 3:
		var until int64
		if len(args) == 3 {
			until, _ = showUntil(args[2])
		}
		r.updateOwnership(x, func(cur *Ownership, now int64) (*Ownership, string) {
			next := cur.with(cur.Epoch, cur.bits)
			for i := range next.Jobs {
				j := &next.Jobs[i]
				if j.State != JobRunning {
					continue
				}
				j.Cancel, j.Updated = true, now
				if j.Pending == nil {
					j.State, j.Ended, j.ShowUntil = JobCancelled, now, until
				}
			}
			return next, ""
		})
	default:
		x.Fail(jobSyntax)
	}
}

// NewJobID is a fresh job name: 40 hex characters, as Valkey's. It is
// made outside the log (the ADD carries it), so replicas agree.
func NewJobID() string {
	var b [20]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
