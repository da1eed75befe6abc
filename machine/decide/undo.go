package decide

import (
	"errors"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/window"
)

// A multi-limit check charges all of its limits or none, also when the
// store refuses a write halfway (keyspace.ErrSlotFull, ErrNoMemory): before
// each limit's state is stored, what its record held is noted, and if a
// later store fails every store made is undone, last first, and no quota
// change is journaled (the journal is told only once every store
// succeeded). Putting back needs no room: an inline state goes back into
// the record that holds the newer one (a record never shrinks, and one
// that grew did so to hold more than the older state), an object is
// written back in place, and a key the check inserted is deleted.

// undoRecord is one key's state before a multi-check stored over it: the
// key is its check's (check, an index into the checks).
type undoRecord struct {
	check   int32
	existed bool
	inline  bool
	// state is the inline state (at [from, to) of the undo buffer); log is
	// an object-held sliding log, cloned.
	from, to int32
	word     int64
	log      *window.LogState
}

// undoLog is an apply's notes, reused from apply to apply.
type undoLog struct {
	records []undoRecord
	states  []byte
}

func (u *undoLog) reset() {
	u.records, u.states = u.records[:0], u.states[:0]
}

// note records checks[i]'s key as it is now, before its store.
func (u *undoLog) note(checks []limitCheck, i int, now int64, entriesValid bool) error {
	c := &checks[i]
	s := c.slot
	if !c.found {
		// Absent when the check looked, and only the last of a key's
		// limits stores (storedLater): nothing to look up.
		u.records = append(u.records, undoRecord{check: int32(i)})
		return nil
	}
	e, found := c.entry, c.inSlot
	if !entriesValid || !found {
		var err error
		if e, found, err = s.GetKind(c.key, c.kind, now); err != nil {
			return err
		}
	}
	r := undoRecord{check: int32(i), existed: found}
	if found {
		r.word, r.inline = s.Word(e), e.Inline()
		switch {
		case r.inline:
			r.from = int32(len(u.states))
			u.states = append(u.states, s.State(e)...)
			r.to = int32(len(u.states))
		case c.kind == keyspace.KindSlidingLog:
			st, ok := s.Object(e).(*window.LogState)
			if !ok || st == nil {
				return window.ErrCorrupt
			}
			saved := st.Clone()
			r.log = &saved
		}
	}
	u.records = append(u.records, r)
	return nil
}

// errUndo: a store failed and putting back what was stored before it
// failed too; the keys named in the error may hold a partial charge.
var errUndo = errors.New("machine: could not undo a partial multi-limit charge")

// rollback puts every noted key back as it was, last noted first.
func (u *undoLog) rollback(checks []limitCheck, now int64) error {
	var errs []error
	for i := len(u.records) - 1; i >= 0; i-- {
		r := &u.records[i]
		c := &checks[r.check]
		e, found, err := c.slot.GetKind(c.key, c.kind, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch {
		case !r.existed:
			if found {
				c.slot.Delete(e)
			}
		case found && r.inline && e.Inline():
			e, err = c.slot.SetState(e, u.states[r.from:r.to])
			if err != nil {
				errs = append(errs, err)
				continue
			}
			c.slot.SetWord(e, r.word)
		case found && r.log != nil && !e.Inline():
			st, ok := c.slot.Object(e).(*window.LogState)
			if !ok || st == nil {
				errs = append(errs, window.ErrCorrupt)
				continue
			}
			*st = *r.log
			c.slot.SetWord(e, r.word)
		case found && !r.inline && r.log == nil:
			// A record with neither inline state nor an object (GCRA): the
			// word is all it holds.
			c.slot.SetWord(e, r.word)
		default:
			// The record changed form (a sliding log that outgrew its
			// record): put the old one back in its place.
			if found {
				c.slot.Delete(e)
			}
			if r.inline {
				_, err = c.slot.InsertState(c.key, c.kind, r.word, u.states[r.from:r.to])
			} else {
				_, err = c.slot.Insert(c.key, c.kind, r.word, r.log)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(append([]error{errUndo}, errs...)...)
	}
	return nil
}
