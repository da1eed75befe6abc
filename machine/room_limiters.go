package machine

import (
	"fmt"

	"github.com/sluice-rl/sluice/conc"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/window"
)

// The limiters room: CL.THROTTLE/GCRA, SW.CHECK, FW.CHECK, CONC.*, QUOTA.*
// (gcra.go, window.go, conc.go, quota.go, inline.go).

func limitersRoom() room {
	return room{commands: func(*Machine) []*Command {
		return concat(gcraCommands(), windowCommands(), concCommands(), quotaCommands())
	}}
}

func limiterKinds() []kindRow {
	return []kindRow{
		{kind: keyspace.KindGCRA, name: "gcra", encode: encodeGCRA, decode: decodeGCRA},
		{kind: keyspace.KindSlidingCounter, name: "sliding-counter",
			encode: encodeAs[*window.CounterState], decode: decodeValue(window.DecodeCounter)},
		{kind: keyspace.KindSlidingLog, name: "sliding-log",
			encode: encodeAs[*window.LogState], decode: decodeValue(window.DecodeLog)},
		{kind: keyspace.KindFixedWindow, name: "fixed-window",
			encode: encodeAs[*window.FixedState], decode: decodeValue(window.DecodeFixed)},
		{kind: keyspace.KindLeases, name: "leases",
			encode: encodeAs[*conc.Leases], decode: decodeValue(conc.DecodeLeases)},
		{kind: keyspace.KindQuota, name: "quota", journaled: true,
			encode: encodeAs[*quota.State], decode: decodeQuota},
	}
}

// encodeGCRA: a GCRA key keeps its whole state in the word; its encoding
// is empty.
func encodeGCRA(dst []byte, obj any) ([]byte, bool) { return dst, obj == nil }

func decodeGCRA(b []byte, _ zoneFunc) (any, error) {
	if len(b) != 0 {
		return nil, fmt.Errorf("GCRA record carries %d state bytes", len(b))
	}
	return nil, nil
}

func decodeQuota(b []byte, zone zoneFunc) (any, error) {
	st, err := quota.DecodeStateWith(b, zone)
	return &st, err
}
