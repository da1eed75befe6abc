package machine

import (
	"fmt"

	"github.com/sluice-rl/sluice/conc"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/window"
)

// The limiters room: CL.THROTTLE/GCRA, SW.CHECK, FW.CHECK, CONC.*, QUOTA.*
// (gcra.go, window.go, conc.go, quota.go, inline.go).

func limitersRoom() roomHooks {
	return roomHooks{commands: func(*Machine) []*Command {
		return concat(gcraCommands(), windowCommands(), concCommands(), quotaCommands())
	}}
}

func limiterKinds() []kindRow {
	return []kindRow{
		{Kind: keyspace.KindGCRA, Name: "gcra", Encode: encodeGCRA, Decode: decodeGCRA},
		{Kind: keyspace.KindSlidingCounter, Name: "sliding-counter", Inline: true,
			Encode: room.EncodeAs[*window.CounterState], Decode: room.DecodeValue(window.DecodeCounter),
			ToRecord: recordOf[*window.CounterState], ToBinary: binaryOf(window.DecodeCounterRecord)},
		{Kind: keyspace.KindSlidingLog, Name: "sliding-log", Inline: true,
			Encode: room.EncodeAs[*window.LogState], Decode: room.DecodeValue(window.DecodeLog)},
		{Kind: keyspace.KindFixedWindow, Name: "fixed-window", Inline: true,
			Encode: room.EncodeAs[*window.FixedState], Decode: room.DecodeValue(window.DecodeFixed),
			ToRecord: recordOf[*window.FixedState], ToBinary: binaryOf(window.DecodeFixedRecord)},
		{Kind: keyspace.KindLeases, Name: "leases", Inline: true,
			Encode: room.EncodeAs[*conc.Leases], Decode: room.DecodeValue(conc.DecodeLeases)},
		{Kind: keyspace.KindQuota, Name: "quota", Journaled: true, Inline: true,
			Encode: room.EncodeAs[*quota.State], Decode: decodeQuota,
			ToRecord: quotaRecord, ToBinary: quota.RecordToBinary},
	}
}

// encodeGCRA: a GCRA key keeps its whole state in the word; its encoding
// is empty.
func encodeGCRA(dst []byte, obj any) ([]byte, bool) { return dst, obj == nil }

func decodeGCRA(b []byte, _ room.ZoneFunc) (any, error) {
	if len(b) != 0 {
		return nil, fmt.Errorf("GCRA record carries %d state bytes", len(b))
	}
	return nil, nil
}

func decodeQuota(b []byte, zone room.ZoneFunc) (any, error) {
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
func binaryOf[T room.Appender](decode func([]byte) (T, error)) func(dst, record []byte) ([]byte, error) {
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
