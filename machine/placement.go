package machine

import (
	"errors"
	"strconv"
)

// A placement request is what one group of a sharded cluster asks of
// another's log besides a check's parts: slots moved to it, the mover's
// configuration, configuration every group applies, the digest of its
// rules. The member channel carries it typed (package member) and the
// receiving group logs Command; its answer is the apply's Outcome (Err,
// Reason, Refusal, Digest), never a reply's text.

// PlacementKind is what a placement request asks of its group.
type PlacementKind uint8

const (
	// PlaceImport takes slots moved from another group: Ranges, their
	// records (Payload, Digest) and their ownership at Epoch
	// (SLUICE.IMPORT).
	PlaceImport PlacementKind = iota + 1
	// PlaceConfig makes another group's whole configuration (Payload,
	// Digest: ExportConfig) this group's (SLUICE.CONFIG).
	PlaceConfig
	// PlaceApply applies Config, a configuration command another group
	// applied (RL.RULES, RL.OVERRIDE, RL.SCALE and its arguments), here too
	// (RL.PART APPLY).
	PlaceApply
	// PlaceDigest answers the digest of the group's rules for Domain (""
	// for every domain) as its log has them (RL.PART DIGEST).
	PlaceDigest
)

// ErrBadPlacement: a placement request that cannot be logged (a kind it
// does not know, a field its kind needs missing).
var ErrBadPlacement = errors.New("machine: malformed placement request")

// PlacementRequest is one placement request (see PlacementKind for what
// each kind reads).
type PlacementRequest struct {
	Kind PlacementKind
	// Epoch, Ranges: an import's.
	Epoch  uint64
	Ranges [][2]int
	// Digest and Payload: an import's records or a configuration copy's
	// (SlotExport).
	Digest  string
	Payload []byte
	// Config is PlaceApply's configuration command, its name first, as
	// the log carries it.
	Config [][]byte
	// Domain is PlaceDigest's ("" for every domain).
	Domain string
}

// Command is the entry the receiving group logs for r.
func (r *PlacementRequest) Command() ([][]byte, error) {
	switch r.Kind {
	case PlaceImport:
		if len(r.Ranges) == 0 || r.Digest == "" {
			return nil, ErrBadPlacement
		}
		cmd := [][]byte{[]byte("SLUICE.IMPORT"), strconv.AppendUint(nil, r.Epoch, 10), []byte(r.Digest), r.Payload}
		for _, rg := range r.Ranges {
			b := strconv.AppendInt(nil, int64(rg[0]), 10)
			b = append(b, '-')
			cmd = append(cmd, strconv.AppendInt(b, int64(rg[1]), 10))
		}
		return cmd, nil
	case PlaceConfig:
		if r.Digest == "" {
			return nil, ErrBadPlacement
		}
		return [][]byte{[]byte("SLUICE.CONFIG"), []byte(r.Digest), r.Payload}, nil
	case PlaceApply:
		if len(r.Config) == 0 {
			return nil, ErrBadPlacement
		}
		return append([][]byte{[]byte("RL.PART"), []byte("APPLY")}, r.Config...), nil
	case PlaceDigest:
		cmd := [][]byte{[]byte("RL.PART"), []byte("DIGEST")}
		if r.Domain != "" {
			cmd = append(cmd, []byte(r.Domain))
		}
		return cmd, nil
	}
	return nil, ErrBadPlacement
}

// PlacementResult is what a group answered a placement request it
// applied without error.
type PlacementResult struct {
	// Digest is PlaceDigest's answer: the digest of the group's rules.
	// Config is that of its whole configuration — rules, overrides,
	// scales (ConfigDigest) — as the leader holds it once the request
	// applied ("" from a member of 0.4.0, which does not say).
	Digest, Config string
}

// PlacementOf is the answer out gives a placement request: its result,
// or the applied command's error — *StaleEpochError for an import the
// group is past, else a *ReplyError with its reason.
func PlacementOf(out Outcome) (PlacementResult, error) {
	var stale *StaleEpochError
	if errors.As(out.Refusal, &stale) {
		return PlacementResult{}, stale
	}
	if out.Err != "" {
		return PlacementResult{}, &ReplyError{Reason: out.Reason, Reply: out.Err}
	}
	return PlacementResult{Digest: out.Digest}, nil
}
