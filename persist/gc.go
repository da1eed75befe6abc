package persist

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"
)

// Quota keys that expire in memory (on access or by the sweeper) are not
// journaled: their store records carry the expiry instant, startup drops
// them, and after each snapshot the writer sweeps the store for them a
// chunk at a time between journal batches. Only the writer goroutine
// writes to the store, so a record the sweep reads is the latest: a key
// recreated since is either already written (and not expired) or still
// queued (and its write lands after the sweep's delete).

// gcChunk is how many store records one sweep step examines, which bounds
// how long journal writes wait behind it.
const gcChunk = 4096

type gcState struct {
	// requested is set by requestGC; the writer picks it up.
	requested    bool
	requestedNow int64
	// active sweeps are at from, removing records that expire at or before now.
	active bool
	from   []byte
	now    int64
	// removed counts records deleted, for INFO.
	removed int64
}

// requestGC asks the writer to sweep the store for records expired at
// now, Unix ns.
func (j *journal) requestGC(now int64) {
	j.mu.Lock()
	j.gc.requested, j.gc.requestedNow = true, now
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// gcStep examines the next chunk of the sweep, if one is under way.
func (j *journal) gcStep() {
	j.mu.Lock()
	g := &j.gc
	if !g.active && g.requested {
		g.active, g.requested = true, false
		g.from, g.now = append(g.from[:0], quotaStart...), g.requestedNow
	}
	active, failed := g.active, j.err != nil
	j.mu.Unlock()
	if !active || failed {
		return
	}
	iter, err := j.db.NewIter(&pebble.IterOptions{LowerBound: g.from, UpperBound: quotaEnd})
	if err != nil {
		j.log.Warn("quota store sweep", "err", err)
		g.active = false
		return
	}
	batch := j.db.NewBatch()
	n, removed := 0, int64(0)
	valid := iter.First()
	for ; valid && n < gcChunk; valid = iter.Next() {
		n++
		v, err := iter.ValueAndErr()
		if err != nil || len(v) < expirySize {
			continue // startup reports corrupt records
		}
		if exp := int64(binary.LittleEndian.Uint64(v)); exp != 0 && exp <= g.now {
			batch.Delete(iter.Key(), nil)
			removed++
		}
	}
	if valid {
		g.from = append(g.from[:0], iter.Key()...)
	}
	err = iter.Close()
	if err == nil && removed > 0 {
		err = batch.Commit(pebble.NoSync)
	}
	batch.Close()
	j.mu.Lock()
	g.removed += removed
	if err != nil || !valid {
		g.active = false
	}
	j.mu.Unlock()
	if err != nil {
		j.log.Warn("quota store sweep", "err", err)
		return
	}
	if valid {
		// More to do: come back after whatever the journal has queued.
		select {
		case j.wake <- struct{}{}:
		default:
		}
	}
}
