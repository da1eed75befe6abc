package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/slot"
)

// LoadInfo is what Open restored.
type LoadInfo struct {
	// SnapshotFound says a snapshot file was read; Snapshot is its header.
	SnapshotFound bool
	Snapshot      Header
	// SnapshotKeys counts keys restored from the snapshot.
	SnapshotKeys int64
	// QuotaKeys counts quota keys restored from the quota store.
	QuotaKeys int64
	// Expired counts records dropped because they had expired.
	Expired int64
	// Superseded counts snapshot records not restored because newer state
	// exists: quota records (the store holds every quota's latest state), or
	// every record when a FLUSHALL was journaled after the snapshot began.
	Superseded int64
	// Took is how long loading took.
	Took time.Duration
}

// load restores the keyspace: the snapshot, then the quota store over it.
// fresh says the store was just created (there is nothing in it). It
// returns the journal's next starting sequence number.
func (s *Store) load(fresh bool) (uint64, error) {
	began := time.Now()
	now := s.deps.Now()
	// The state is restored as it is at the instant it was saved at: keys
	// are judged live at the snapshot's applied instant, never the clock's
	// (keys that expired since read as absent once the machine moves on,
	// and the sweep removes them).
	var applied int64
	storeErr := func(err error) error {
		return storeFault(fmt.Errorf("persist: read quota store %s: %w", s.dbPath, err))
	}
	storeSeq, _, err := getUvarint(s.db, metaSeq)
	if err != nil {
		return 0, storeErr(err)
	}
	flushSeq, flushed, err := getUvarint(s.db, metaFlush)
	if err != nil {
		return 0, storeErr(err)
	}
	meta, hasMeta, err := getSnapshotMeta(s.db)
	if err != nil {
		return 0, storeErr(err)
	}

	info := LoadInfo{}
	zones := zoneCache{}
	// A store created now has no quotas: the snapshot's are the latest
	// known, and are copied into it. So does a store being rebuilt.
	var seed *pebble.Batch
	if fresh {
		seed = s.db.NewBatch()
		defer seed.Close()
	}
	hdr, hdrFound, err := s.snapshotHeader()
	if err != nil {
		return 0, err
	}
	// Every completed snapshot had its quota changes synced to the store
	// first, and SyncedFile records how far the store was synced: a store
	// numbered below either lost writes it had on disk (a damaged or
	// truncated log that Pebble took for the torn tail of a crash).
	synced := readWitness(s.fs, s.witnessPath)
	if !fresh && (hdrFound && storeSeq < hdr.Seq || storeSeq < synced) {
		return 0, storeFault(fmt.Errorf("%w: %s holds changes up to %d, but it had synced changes up to %d (%s: %d, snapshot %s: %d); "+
			"a log file (%s) was damaged or truncated. Restore the directory, or start once with --rebuild-quota-store "+
			"to rebuild it from the snapshot (quota changes made after the snapshot are lost)",
			ErrStoreBehind, s.dbPath, storeSeq, max(hdr.Seq, synced), s.witnessPath, synced, s.snapPath, hdr.Seq,
			s.fs.PathJoin(s.dbPath, "*.log")))
	}
	if fresh && hdrFound {
		s.log.Warn("quota store rebuilt from the snapshot", "store", s.dbPath, "snapshot", s.snapPath)
	}
	f, err := s.fs.Open(s.snapPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if hasMeta {
			return 0, fmt.Errorf("%w: %s (the quota store %s records a snapshot taken at %s; restore the file, or move the data directory aside to start empty)",
				ErrMissingSnapshot, s.snapPath, s.dbPath, time.Unix(0, meta.Created).UTC().Format(time.RFC3339))
		}
	case err != nil:
		return 0, fmt.Errorf("persist: read snapshot %s: %w", s.snapPath, err)
	default:
		info.SnapshotFound = true
		size, err := s.restoreSnapshot(f, flushed, flushSeq, zones, seed, &info)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("persist: read snapshot %s: %w", s.snapPath, err)
		}
		if hasMeta && info.Snapshot.Seq < meta.Seq {
			s.log.Warn("the snapshot is older than the last one this data directory wrote; non-quota keys are restored as of then",
				"file", s.snapPath, "created", time.Unix(0, info.Snapshot.Created).UTC())
		}
		s.last = SaveInfo{Seq: info.Snapshot.Seq, Created: info.Snapshot.Created, Keys: info.SnapshotKeys + info.Expired + info.Superseded, Bytes: size}
	}
	if !info.SnapshotFound {
		s.last = SaveInfo{Created: now}
	}
	if seed != nil {
		// The new store holds what the snapshot held: it is as far along
		// the journal as the snapshot (the check for a store behind its
		// snapshot relies on it).
		seed.Set(metaSeq, binary.AppendUvarint(nil, max(info.Snapshot.Seq, synced)), nil)
		if err := seed.Commit(pebble.Sync); err != nil {
			return 0, storeErr(err)
		}
	}
	if info.SnapshotFound {
		applied = info.Snapshot.Applied
	}
	if err := s.restoreQuotas(applied, &info); err != nil {
		return 0, err
	}
	if s.deps.Restore != nil {
		s.deps.Restore(applied)
	}
	info.Took = time.Since(began)
	s.loaded = info
	s.log.Info("loaded state", "snapshot", s.snapPath, "snapshot_found", info.SnapshotFound,
		"snapshot_keys", info.SnapshotKeys, "quota_keys", info.QuotaKeys, "expired", info.Expired,
		"superseded", info.Superseded, "took", info.Took.Round(time.Microsecond))
	return max(storeSeq, flushSeq, meta.Seq, info.Snapshot.Seq, synced), nil
}

// snapshotHeader reads the snapshot's header, if the file exists.
func (s *Store) snapshotHeader() (Header, bool, error) {
	f, err := s.fs.Open(s.snapPath)
	if errors.Is(err, os.ErrNotExist) {
		return Header{}, false, nil
	}
	if err != nil {
		return Header{}, false, fmt.Errorf("persist: read snapshot %s: %w", s.snapPath, err)
	}
	defer f.Close()
	sr, err := NewSnapshotReader(f)
	if err != nil {
		return Header{}, false, fmt.Errorf("persist: read snapshot %s: %w", s.snapPath, err)
	}
	return sr.Header(), true, nil
}

// restoreSnapshot inserts the snapshot's live records into the keyspace.
// Quota records are skipped unless seed is set (a fresh store), in which
// case they are also added to seed. It returns the file's size.
func (s *Store) restoreSnapshot(f io.Reader, flushed bool, flushSeq uint64, zones zoneCache, seed *pebble.Batch, info *LoadInfo) (int64, error) {
	sr, err := NewSnapshotReader(f)
	if err != nil {
		return 0, err
	}
	info.Snapshot = sr.Header()
	now := info.Snapshot.Applied
	// A FLUSHALL journaled after the snapshot began emptied everything the
	// snapshot holds.
	stale := flushed && flushSeq > info.Snapshot.Seq
	var val []byte
	for {
		rec, ok := sr.Next()
		if !ok {
			break
		}
		switch {
		case stale || (machine.Journaled(rec.Kind) && seed == nil):
			info.Superseded++
			continue
		case expired(rec.Word, now):
			info.Expired++
			continue
		}
		if err := restoreRecord(s.deps.Keys, rec.Key, rec.Word, func() (keyspace.Kind, any, error) {
			obj, err := machine.DecodeState(rec.Kind, rec.State, zones.load)
			return rec.Kind, obj, err
		}); err != nil {
			return 0, fmt.Errorf("%w: record %d, key %q: %w", ErrCorruptSnapshot, sr.Records(), rec.Key, err)
		}
		info.SnapshotKeys++
		if machine.Journaled(rec.Kind) && seed != nil {
			val = binary.LittleEndian.AppendUint64(val[:0], uint64(rec.Word))
			if rec.Kind != keyspace.KindQuota {
				val = append(val, recordMarker, byte(rec.Kind))
			}
			val = append(val, rec.State...)
			seed.Set(appendQuotaKey(nil, rec.Key), val, nil)
		}
	}
	if err := sr.Err(); err != nil {
		return 0, err
	}
	return sr.rd.total, nil
}

// restoreQuotas inserts the store's live quota states over whatever the
// snapshot restored, and deletes expired ones from the store. Store keys
// are ordered by slot, so the slots are split into ranges restored in
// parallel (each key's slot lock is taken by one worker only).
func (s *Store) restoreQuotas(now int64, info *LoadInfo) error {
	workers := min(runtime.GOMAXPROCS(0), 8)
	results := make([]LoadInfo, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo := slot.Count * w / workers
		hi := slot.Count * (w + 1) / workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = s.restoreQuotaSlots(lo, hi, now, &results[w])
		}()
	}
	wg.Wait()
	for w := range workers {
		info.QuotaKeys += results[w].QuotaKeys
		info.Expired += results[w].Expired
	}
	return errors.Join(errs...)
}

// restoreQuotaSlots restores the quotas of slots [lo, hi).
func (s *Store) restoreQuotaSlots(lo, hi int, now int64, info *LoadInfo) (err error) {
	corrupt := func(k []byte, err error) error {
		return storeFault(fmt.Errorf("persist: read quota store %s: %w: key %q: %w", s.dbPath, ErrCorruptStore, k, err))
	}
	slotKey := func(i int) []byte {
		if i >= slot.Count {
			return quotaEnd
		}
		return []byte{quotaPrefix, byte(i >> 8), byte(i)}
	}
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: slotKey(lo), UpperBound: slotKey(hi)})
	if err != nil {
		return storeFault(fmt.Errorf("persist: read quota store %s: %w", s.dbPath, err))
	}
	defer func() {
		if cerr := iter.Close(); err == nil && cerr != nil {
			err = storeFault(fmt.Errorf("persist: read quota store %s: %w", s.dbPath, cerr))
		}
	}()
	zones := zoneCache{}
	drop := s.db.NewBatch()
	defer drop.Close()
	for valid := iter.First(); valid; valid = iter.Next() {
		k := iter.Key()
		key, ok := splitQuotaKey(k)
		if !ok {
			return corrupt(k, errors.New("key is not in its slot"))
		}
		v, err := iter.ValueAndErr()
		if err == nil && len(v) < expirySize {
			err = errors.New("value too short")
		}
		if err != nil {
			return corrupt(key, err)
		}
		exp := int64(binary.LittleEndian.Uint64(v))
		if expired(exp, now) {
			drop.Delete(k, nil)
			info.Expired++
			continue
		}
		if err := restoreRecord(s.deps.Keys, key, exp, func() (keyspace.Kind, any, error) {
			return decodeStored(v[expirySize:], zones)
		}); err != nil {
			return corrupt(key, err)
		}
		info.QuotaKeys++
	}
	if drop.Count() > 0 {
		if err := drop.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("persist: write quota store %s: %w", s.dbPath, err)
		}
	}
	return nil
}

// decodeStored decodes a quota store value after its expiry: a quota
// state, or recordMarker, a kind and that kind's state.
func decodeStored(v []byte, zones zoneCache) (keyspace.Kind, any, error) {
	if len(v) > 0 && v[0] == recordMarker {
		if len(v) < 2 || !machine.Journaled(keyspace.Kind(v[1])) || keyspace.Kind(v[1]) == keyspace.KindQuota {
			return 0, nil, errors.New("unknown record kind")
		}
		obj, err := machine.DecodeState(keyspace.Kind(v[1]), v[2:], zones.load)
		return keyspace.Kind(v[1]), obj, err
	}
	st, err := quota.DecodeStateWith(v, zones.load)
	return keyspace.KindQuota, &st, err
}

// expired reports whether a key whose word is word has expired at now, by
// the keyspace's rule: the word is the expiry instant (for GCRA the TAT,
// which is also when the key expires), 0 never.
func expired(word, now int64) bool { return word != 0 && word <= now }

// restoreRecord decodes a record's state with decode and inserts key with
// it. A panic in either (a state no decoder expected) is an error, which
// the caller reports naming the key: a start refuses such a file rather
// than dying on it.
func restoreRecord(ks *keyspace.Keyspace, key []byte, word int64, decode func() (keyspace.Kind, any, error)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic restoring the state: %v", p)
		}
	}()
	kind, obj, err := decode()
	if err != nil {
		return err
	}
	return insert(ks, key, kind, word, obj)
}

// insert puts a key into the keyspace, replacing whatever it held.
func insert(ks *keyspace.Keyspace, key []byte, kind keyspace.Kind, word int64, obj any) error {
	s := ks.LockKey(key)
	defer s.Unlock()
	return machine.StoreState(s, key, kind, word, obj)
}
