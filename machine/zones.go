package machine

import (
	"sync"
	"time"

	"github.com/sluice-rl/sluice/quota"
)

// zoneCache keeps the time zones quota commands have loaded: parsing a zone
// from the tz database costs far more than the check it serves. Only valid
// zones are cached, so its size is bounded by the database. Zones come from
// the database compiled into the binary (quota.LoadZone), so every replica
// reads the same rules whatever its host has installed.
type zoneCache struct{ m sync.Map }

func (z *zoneCache) load(name string) (*time.Location, error) {
	if loc, ok := z.m.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := quota.LoadZone(name)
	if err != nil {
		return nil, err
	}
	z.m.Store(name, loc)
	return loc, nil
}
