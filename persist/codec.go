package persist

import (
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/conc"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/window"
)

// The keyspace holds, per kind, a pointer to the algorithm's state (GCRA
// keeps its whole state in the word). These two functions are the one
// place that knows the pairing; a new kind adds a case to each.

// appendState appends the encoding of obj, the state of a key of kind.
func appendState(dst []byte, kind keyspace.Kind, obj any) ([]byte, error) {
	switch st := obj.(type) {
	case nil:
		if kind == keyspace.KindGCRA {
			return dst, nil
		}
	case *window.CounterState:
		if kind == keyspace.KindSlidingCounter {
			return st.AppendBinary(dst), nil
		}
	case *window.LogState:
		if kind == keyspace.KindSlidingLog {
			return st.AppendBinary(dst), nil
		}
	case *window.FixedState:
		if kind == keyspace.KindFixedWindow {
			return st.AppendBinary(dst), nil
		}
	case *conc.Leases:
		if kind == keyspace.KindLeases {
			return st.AppendBinary(dst), nil
		}
	case *quota.State:
		if kind == keyspace.KindQuota {
			return st.AppendBinary(dst), nil
		}
	}
	return dst, fmt.Errorf("%w: kind %s, state %T", ErrUnencodable, kind, obj)
}

// decodeState rebuilds the object appendState encoded. zone loads quota
// time zones (a cache: restoring a million keys in one zone should parse it
// once).
func decodeState(kind keyspace.Kind, b []byte, zone func(string) (*time.Location, error)) (any, error) {
	switch kind {
	case keyspace.KindGCRA:
		if len(b) != 0 {
			return nil, fmt.Errorf("GCRA record carries %d state bytes", len(b))
		}
		return nil, nil
	case keyspace.KindSlidingCounter:
		st, err := window.DecodeCounter(b)
		return &st, err
	case keyspace.KindSlidingLog:
		st, err := window.DecodeLog(b)
		return &st, err
	case keyspace.KindFixedWindow:
		st, err := window.DecodeFixed(b)
		return &st, err
	case keyspace.KindLeases:
		st, err := conc.DecodeLeases(b)
		return &st, err
	case keyspace.KindQuota:
		st, err := quota.DecodeStateWith(b, zone)
		return &st, err
	}
	return nil, fmt.Errorf("unknown kind %d", kind)
}

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
