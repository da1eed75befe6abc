package persist

import (
	"time"

	"github.com/sluice-rl/sluice/quota"
)

// zoneCache loads each quota time zone once per restore.
type zoneCache map[string]*time.Location

func (z zoneCache) load(name string) (*time.Location, error) {
	if loc, ok := z[name]; ok {
		return loc, nil
	}
	loc, err := quota.LoadZone(name)
	if err != nil {
		return nil, err
	}
	z[name] = loc
	return loc, nil
}
