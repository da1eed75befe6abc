package limiters

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/conc"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/window"
)

// Exec is one command's apply as this room sees it; the core's apply
// (package machine) implements it.
type Exec interface {
	// LockKey locks key's slot and returns it with the instant to apply
	// at. Release it with Unlock.
	LockKey(key []byte) (*keyspace.Slot, int64)
	Unlock(s *keyspace.Slot)
	// Reply is where the command's reply is written.
	Reply() *resp.Writer
	// Limiter answers a limiter's decision, the five-integer reply, and
	// records a refusal in the apply's outcome.
	Limiter(res limiter.Result)
	// LimiterReply answers a decision already in that reply's form.
	LimiterReply(limited bool, reply [5]int64)
	// At reports whether the log's apply level is at least l (package
	// machine's levels): a command a release adds answers only from the
	// level every member applies alike.
	At(l uint32) bool
	// Error answers an error from an algorithm or the keyspace.
	Error(err error)
	// Fail answers the error reply of a command that was wrong; FailFor
	// one of another reason.
	Fail(msg string)
	FailFor(r room.Reason, msg string)
	// QuotaChanged journals key's new quota state; call it holding the
	// key's slot lock. The reply waits for the journal.
	QuotaChanged(key []byte, st *quota.State)
	// Scratch is the room's buffers, reused from one apply to the next.
	Scratch() *Scratch
}

// Scratch are the buffers an apply reuses from the last one. Nothing an
// apply returns may alias them. The core's other rooms use Enc and Log the
// same way (a check's sliding log, a settle's).
type Scratch struct {
	// Leases and Enc are a CONC command's leases decoded from their record
	// and their encoding on the way back.
	Leases conc.Leases
	Enc    []byte
	// Log is a sliding log decoded from its record.
	Log window.LogState
	// Quota is a quota command's new state: the journal takes a pointer
	// to it, which would move a local to the heap on every call.
	Quota quota.State
}

// Room is the limiters of one machine: their commands, and the time zones
// quotas have loaded.
type Room struct {
	zones zoneCache
}

// New returns the room of a new machine.
func New() *Room { return &Room{} }

// Commands are the room's commands.
func (r *Room) Commands() []room.Command[Exec] {
	var all []room.Command[Exec]
	for _, l := range [][]room.Command[Exec]{gcraCommands(), redisGCRACommands(), windowCommands(), concCommands(), r.quotaCommands()} {
		all = append(all, l...)
	}
	return all
}

// Zone loads a quota's time zone through the room's cache.
func (r *Room) Zone(name string) (*time.Location, error) { return r.zones.load(name) }

// Kinds are the kinds of record the room keeps.
func Kinds() []room.Kind {
	return []room.Kind{
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
		return dst, errNotThisKind
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
		return dst, errNotThisKind
	}
	return st.AppendRecord(dst)
}

// errNotThisKind: a state given to a kind's record conversion is another
// kind's (the core checks with Encode first; this is never answered).
var errNotThisKind = errors.New("limiters: state does not match its kind")
