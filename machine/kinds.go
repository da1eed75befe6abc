package machine

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/conc"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/window"
)

// The one place that pairs a keyspace kind with what it means: the name
// TYPE answers and SCAN TYPE matches, and how its state is encoded in
// snapshots and digests. A new limiter kind adds a keyspace.Kind number
// and a row here.

// ErrUnencodable is a state whose type does not match its key's kind.
var ErrUnencodable = errors.New("machine: state does not match its kind")

// kindNames are TYPE's answers, by keyspace.Kind.
var kindNames = [...]string{
	keyspace.KindNone:            "none",
	keyspace.KindGCRA:            "gcra",
	keyspace.KindSlidingCounter:  "sliding-counter",
	keyspace.KindSlidingLog:      "sliding-log",
	keyspace.KindFixedWindow:     "fixed-window",
	keyspace.KindLeases:          "leases",
	keyspace.KindQuota:           "quota",
	keyspace.KindRules:           "ratelimit-rules",
	keyspace.KindOverride:        "ratelimit-override",
	keyspace.KindScale:           "ratelimit-scale",
	keyspace.KindReservation:     "ratelimit-reservation",
	keyspace.KindOwnership:       "slot-ownership",
	keyspace.KindGroups:          "cluster-groups",
	keyspace.KindReservationPart: "ratelimit-reservation-part",
	keyspace.KindLeaseDemand:     "ratelimit-lease-demand",
	keyspace.KindLease:           "ratelimit-lease",
	keyspace.KindLevel:           "apply-level",
}

// KindName is the name TYPE answers for a key of kind k.
func KindName(k keyspace.Kind) string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "none"
}

// KindNamed is the kind TYPE calls name, for SCAN TYPE.
func KindNamed(name string) (keyspace.Kind, bool) {
	for k, n := range kindNames {
		if k != int(keyspace.KindNone) && n == name {
			return keyspace.Kind(k), true
		}
	}
	return keyspace.KindNone, false
}

// EncodeState appends the encoding of obj, the state of a key of kind.
// GCRA keys keep their whole state in the word: their encoding is empty.
func EncodeState(dst []byte, kind keyspace.Kind, obj any) ([]byte, error) {
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
	case *RulesState:
		if kind == keyspace.KindRules {
			return st.AppendBinary(dst), nil
		}
	case *OverrideState:
		if kind == keyspace.KindOverride {
			return st.AppendBinary(dst), nil
		}
	case *ScaleState:
		if kind == keyspace.KindScale {
			return st.AppendBinary(dst), nil
		}
	case *ReservationState:
		if kind == keyspace.KindReservation || kind == keyspace.KindReservationPart || kind == keyspace.KindLease {
			return st.AppendBinary(dst), nil
		}
	case *Ownership:
		if kind == keyspace.KindOwnership {
			return st.AppendBinary(dst), nil
		}
	case *GroupList:
		if kind == keyspace.KindGroups {
			return st.AppendBinary(dst), nil
		}
	case *LeaseDemand:
		if kind == keyspace.KindLeaseDemand {
			return st.AppendBinary(dst), nil
		}
	case *LevelState:
		if kind == keyspace.KindLevel {
			return st.AppendBinary(dst), nil
		}
	}
	return dst, fmt.Errorf("%w: kind %s, state %T", ErrUnencodable, KindName(kind), obj)
}

// Journaled reports whether changes to keys of kind are written through to
// the quota store as they happen (Durability), not only snapshotted.
func Journaled(kind keyspace.Kind) bool {
	return kind == keyspace.KindQuota || kind == keyspace.KindOverride || kind == keyspace.KindScale
}

// DecodeState rebuilds the object EncodeState encoded. zone loads quota
// time zones (a cache: restoring a million keys in one zone should parse it
// once).
func DecodeState(kind keyspace.Kind, b []byte, zone func(string) (*time.Location, error)) (any, error) {
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
	case keyspace.KindRules:
		return decodeRules(b)
	case keyspace.KindOverride:
		return decodeOverride(b)
	case keyspace.KindScale:
		return decodeScale(b)
	case keyspace.KindReservation, keyspace.KindReservationPart, keyspace.KindLease:
		return decodeReservation(b)
	case keyspace.KindOwnership:
		return decodeOwnership(b)
	case keyspace.KindGroups:
		return decodeGroupList(b)
	case keyspace.KindLeaseDemand:
		return decodeLeaseDemand(b)
	case keyspace.KindLevel:
		return decodeLevel(b)
	}
	return nil, fmt.Errorf("unknown kind %d", kind)
}
