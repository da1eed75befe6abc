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
		{kind: keyspace.KindSlidingCounter, name: "sliding-counter", inline: true,
			encode: encodeAs[*window.CounterState], decode: decodeValue(window.DecodeCounter),
			toRecord: recordOf[*window.CounterState], toBinary: binaryOf(window.DecodeCounterRecord)},
		{kind: keyspace.KindSlidingLog, name: "sliding-log", inline: true,
			encode: encodeAs[*window.LogState], decode: decodeValue(window.DecodeLog)},
		{kind: keyspace.KindFixedWindow, name: "fixed-window", inline: true,
			encode: encodeAs[*window.FixedState], decode: decodeValue(window.DecodeFixed),
			toRecord: recordOf[*window.FixedState], toBinary: binaryOf(window.DecodeFixedRecord)},
		{kind: keyspace.KindLeases, name: "leases", inline: true,
			encode: encodeAs[*conc.Leases], decode: decodeValue(conc.DecodeLeases)},
		{kind: keyspace.KindQuota, name: "quota", journaled: true, inline: true,
			encode: encodeAs[*quota.State], decode: decodeQuota,
			toRecord: quotaRecord, toBinary: quota.RecordToBinary},
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

// recordOf is the toRecord of a window state.
func recordOf[T interface{ AppendRecord([]byte) []byte }](dst []byte, obj any) ([]byte, error) {
	st, ok := obj.(T)
	if !ok {
		return dst, ErrUnencodable
	}
	return st.AppendRecord(dst), nil
}

// binaryOf is the toBinary of a window state whose record decode gives.
func binaryOf[T appender](decode func([]byte) (T, error)) func(dst, record []byte) ([]byte, error) {
	return func(dst, record []byte) ([]byte, error) {
		st, err := decode(record)
		if err != nil {
			return dst, err
		}
		return st.AppendBinary(dst), nil
	}
}

// quotaRecord is a quota's toRecord.
func quotaRecord(dst []byte, obj any) ([]byte, error) {
	st, ok := obj.(*quota.State)
	if !ok {
		return dst, ErrUnencodable
	}
	return st.AppendRecord(dst)
}
