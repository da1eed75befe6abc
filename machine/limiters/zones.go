package limiters

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/quota"
)

// zoneCache keeps the time zones quota commands have loaded: parsing a zone
// from the tz database costs far more than the check it serves. Only valid
// zones are cached, so its size is bounded by the database. Zones come from
// the database compiled into the binary (quota.LoadZone), so every replica
// reads the same rules whatever its host has installed.
//
// Every quota apply decodes its key's zone name from the record, so reads
// are one atomic load and a map lookup by the name's bytes (no copy, no
// lock); the rare new zone copies the map.
type zoneCache struct {
	mu sync.Mutex // serializes additions
	m  atomic.Pointer[map[string]*time.Location]
}

// load loads the zone a record names; it allocates only the first time
// a zone is seen.
func (z *zoneCache) load(name string) (*time.Location, error) {
	if m := z.m.Load(); m != nil {
		if loc, ok := (*m)[name]; ok {
			return loc, nil
		}
	}
	return z.add(name)
}

// loadBytes is load of a name in an argument, without copying it.
func (z *zoneCache) loadBytes(name []byte) (*time.Location, error) {
	if m := z.m.Load(); m != nil {
		if loc, ok := (*m)[string(name)]; ok {
			return loc, nil
		}
	}
	return z.add(string(name))
}

// add loads a zone not yet cached and caches it.
func (z *zoneCache) add(name string) (*time.Location, error) {
	loc, err := quota.LoadZone(name)
	if err != nil {
		return nil, err
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	next := map[string]*time.Location{name: loc}
	if m := z.m.Load(); m != nil {
		for k, v := range *m {
			next[k] = v
		}
	}
	z.m.Store(&next)
	return loc, nil
}
