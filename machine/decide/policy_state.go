package decide

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/bits"
	"slices"

	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/policy"
)

// The state behind RL.CHECK lives in the keyspace like every limiter's, so
// snapshots, DEBUG DIGEST, replication and expiry cover it with no extra
// machinery:
//
//   - the loaded rule files under one key, RulesKey (kind rules): the files'
//     bytes as applied, and their parse;
//   - each override under its descriptor's key plus "#override" (kind
//     override), in the domain's slot, expiring at its end instant;
//   - each domain's scale factor under "rl:{<domain>}#scale" (kind scale),
//     in the domain's slot too.
//
// Overrides and scale factors are journaled to the quota store as they
// change, so one node keeps them across a crash; the rules come back from
// their files at start.

// RulesKey is the key that holds the loaded rules.
const RulesKey = "sluice:rules"

// ErrCorruptPolicy is a rules, override or scale record that does not decode.
var ErrCorruptPolicy = errors.New("machine: corrupt policy record")

// RuleFile is one rule file as loaded: its name (for errors and listings),
// its bytes, and where it came from.
type RuleFile struct {
	Name   string
	Source []byte
	// Client marks a file a client loaded (RL.RULES LOAD), as opposed to
	// the server's --rules files (RL.RULES LOAD-FILES): a reload of the
	// server's files keeps client files whose domains it does not define.
	Client bool
}

// RulesState is the value of RulesKey: the files, and the rule set parsed
// from them. Parsing is a pure function of the bytes (time zones come from
// the tz database compiled in), so every replica holds the same set.
type RulesState struct {
	Files []RuleFile
	Set   *policy.Set
	// Domains are the files' domains, in the same order.
	Domains []string
	// FilesDigest identifies the server's files as last loaded
	// (FilesDigestOf), kept through RL.RULES CLEAR and client loads: a
	// server re-applies its files only when they differ from it, so a
	// CLEAR stays cleared until the files change or are reloaded.
	FilesDigest [32]byte
	// digests identify each domain's rules (its file's bytes), and all
	// identifies the whole set: what the groups of a sharded cluster
	// compare (Room.RulesDigest). Read-only once built.
	digests map[string]string
	all     string
}

// FilesDigestOf identifies a set of rule files by their names and bytes.
func FilesDigestOf(files []RuleFile) [32]byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, f := range files {
		h.Write(binary.AppendUvarint(n[:0], uint64(len(f.Name))))
		h.Write([]byte(f.Name))
		h.Write(binary.AppendUvarint(n[:0], uint64(len(f.Source))))
		h.Write(f.Source)
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// ParseRules builds the rule set of files: every file must parse, and no
// two may name one domain.
func ParseRules(files []RuleFile) (*RulesState, error) {
	domains := make([]*policy.Domain, 0, len(files))
	for _, f := range files {
		d, err := policy.Parse(f.Name, f.Source)
		if err != nil {
			return nil, err
		}
		for _, r := range d.Rules {
			if r.Algorithm == policy.Concurrency {
				return nil, &policy.Error{File: r.File, Line: r.Line, Err: policy.ErrInvalid,
					Problem: "concurrency limits need a release and are not checked by RL.CHECK: use CONC.ACQUIRE"}
			}
		}
		domains = append(domains, d)
	}
	set, err := policy.NewSet(domains...)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(domains))
	digests := make(map[string]string, len(domains))
	for i, d := range domains {
		names[i] = d.Name
		digests[d.Name] = digestOf(d.Name, files[i].Source)
	}
	// The set's digest is over the domains' in name order: two groups that
	// loaded the same files in another order hold the same rules.
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	var b []byte
	for _, name := range sorted {
		b = append(b, name...)
		b = append(b, 0)
		b = append(b, digests[name]...)
	}
	return &RulesState{Files: files, Set: set, Domains: names, digests: digests, all: digestOf("", b)}, nil
}

// NoRules is the digest of a domain no rule file defines (and of no
// rules at all).
const NoRules = "none"

// digestOf is a short, stable name for a domain's rules: 16 hex digits of
// the SHA-256 of its name and source.
func digestOf(domain string, source []byte) string {
	h := sha256.New()
	h.Write([]byte(domain))
	h.Write([]byte{0})
	h.Write(source)
	var d [32]byte
	return hex.EncodeToString(h.Sum(d[:0])[:8])
}

// RulesDigest identifies the rules of domain in force ("" for the whole
// set), NoRules when there are none: equal digests, equal rules.
func (m *Room) RulesDigest(domain string) string {
	st := m.ruleState.Load()
	if st == nil {
		return NoRules
	}
	if domain == "" {
		if len(st.Domains) == 0 {
			return NoRules
		}
		return st.all
	}
	if d, ok := st.digests[domain]; ok {
		return d
	}
	return NoRules
}

// rulesTrailer starts what follows the files in the encoding since rules
// carry their origin: one byte per file (1: a client's), then the files
// digest. An encoding without it is older: every file the server's, and
// the digest theirs.
const rulesTrailer = 1

// AppendBinary appends the files (a count, then each name and source
// length-prefixed), then the trailer.
func (r *RulesState) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(r.Files)))
	for _, f := range r.Files {
		dst = binary.AppendUvarint(dst, uint64(len(f.Name)))
		dst = append(dst, f.Name...)
		dst = binary.AppendUvarint(dst, uint64(len(f.Source)))
		dst = append(dst, f.Source...)
	}
	dst = append(dst, rulesTrailer)
	for _, f := range r.Files {
		if f.Client {
			dst = append(dst, 1)
		} else {
			dst = append(dst, 0)
		}
	}
	return append(dst, r.FilesDigest[:]...)
}

// Bytes is the memory the state holds, roughly (for used_memory_keyspace).
func (r *RulesState) Bytes() int {
	n := 64
	for _, f := range r.Files {
		n += len(f.Name) + 4*len(f.Source) // the parse costs a few times the text
	}
	return n
}

func decodeRules(b []byte) (*RulesState, error) {
	d := room.Reader{B: b}
	n := d.Uvarint(1 << 16)
	files := make([]RuleFile, 0, min(n, 64))
	for range n {
		name := d.Bytes()
		src := d.Bytes()
		if d.Bad {
			break
		}
		files = append(files, RuleFile{Name: string(name), Source: append([]byte(nil), src...)})
	}
	if d.Bad {
		return nil, ErrCorruptPolicy
	}
	var digest [32]byte
	switch {
	case len(d.B) == 0: // before origins: every file the server's
		digest = FilesDigestOf(files)
	case d.B[0] == rulesTrailer && len(d.B) == 1+len(files)+32:
		for i := range files {
			switch d.B[1+i] {
			case 0:
			case 1:
				files[i].Client = true
			default:
				return nil, ErrCorruptPolicy
			}
		}
		copy(digest[:], d.B[1+len(files):])
	default:
		return nil, ErrCorruptPolicy
	}
	st, err := ParseRules(files)
	if err != nil {
		return nil, errors.Join(ErrCorruptPolicy, err)
	}
	st.FilesDigest = digest
	return st, nil
}

// OverrideState is a run-time limit for one descriptor of a domain: it
// replaces the limit (and window, and GCRA burst) of the rule that
// descriptor matches, from Start (0: at once) until the record expires.
type OverrideState struct {
	// Entries is the descriptor, as RL.OVERRIDE LIST shows it.
	Entries []policy.Entry
	// Limit is the units per Window (ns); Burst is GCRA's max_burst, or -1
	// to keep the rule's.
	Limit, Window, Burst int64
	// Start and Until are the instants it applies from and until (Unix ns;
	// 0: unbounded). Until is also the record's expiry.
	Start, Until int64
}

// ActiveAt reports whether the override applies at now.
func (o *OverrideState) ActiveAt(now int64) bool {
	return o.Start <= now && (o.Until == 0 || now < o.Until)
}

// AppendBinary appends the override's encoding.
func (o *OverrideState) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(o.Entries)))
	for _, e := range o.Entries {
		dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
		dst = append(dst, e.Key...)
		dst = binary.AppendUvarint(dst, uint64(len(e.Value)))
		dst = append(dst, e.Value...)
	}
	for _, v := range [...]int64{o.Limit, o.Window, o.Burst, o.Start, o.Until} {
		dst = binary.AppendVarint(dst, v)
	}
	return dst
}

// Bytes is the memory the override holds, roughly.
func (o *OverrideState) Bytes() int {
	n := 80
	for _, e := range o.Entries {
		n += 32 + len(e.Key) + len(e.Value)
	}
	return n
}

func decodeOverride(b []byte) (*OverrideState, error) {
	d := room.Reader{B: b}
	n := d.Uvarint(policy.DefaultLimits().MaxDepth)
	o := &OverrideState{}
	for range n {
		k, v := d.Bytes(), d.Bytes()
		if d.Bad {
			break
		}
		o.Entries = append(o.Entries, policy.Entry{Key: string(k), Value: string(v)})
	}
	for _, p := range []*int64{&o.Limit, &o.Window, &o.Burst, &o.Start, &o.Until} {
		*p = d.Varint()
	}
	if d.Bad || len(d.B) != 0 || o.Limit < 0 || o.Window <= 0 || o.Burst < -1 {
		return nil, ErrCorruptPolicy
	}
	return o, nil
}

// ScaleUnit is a scale factor of 1: factors are integers in millionths.
const ScaleUnit = 1_000_000

// ScaleState is a domain's adaptive scale factor. Lowering it takes effect
// at once; raising it moves from From to To linearly over Recovery,
// starting at Since, so a recovered backend is not hit by the whole load
// at one instant.
type ScaleState struct {
	From, To        int64 // millionths, in (0, ScaleUnit]
	Since, Recovery int64 // ns
}

// At is the factor in effect at now, in millionths.
func (s *ScaleState) At(now int64) int64 {
	if s.To <= s.From || s.Recovery <= 0 || now >= s.Since+s.Recovery {
		return s.To
	}
	if now <= s.Since {
		return s.From
	}
	// From + (To−From)·elapsed/Recovery, in 128 bits: (To−From) ≤ 10⁶ and
	// elapsed may be hours of nanoseconds.
	hi, lo := bits.Mul64(uint64(s.To-s.From), uint64(now-s.Since))
	q, _ := bits.Div64(hi, lo, uint64(s.Recovery))
	return s.From + int64(q)
}

// RecoveredAt is the instant the factor reaches To.
func (s *ScaleState) RecoveredAt() int64 {
	if s.To <= s.From {
		return s.Since
	}
	return s.Since + s.Recovery
}

// Scale applies factor (millionths) to n: ⌊n·factor⌋, at least 1 when n is
// positive, so a scaled limit never becomes a ban.
func Scale(n, factor int64) int64 {
	if factor >= ScaleUnit || n <= 0 {
		return n
	}
	hi, lo := bits.Mul64(uint64(n), uint64(factor))
	q, _ := bits.Div64(hi, lo, ScaleUnit)
	return max(1, int64(q))
}

// AppendBinary appends the scale's encoding.
func (s *ScaleState) AppendBinary(dst []byte) []byte {
	for _, v := range [...]int64{s.From, s.To, s.Since, s.Recovery} {
		dst = binary.AppendVarint(dst, v)
	}
	return dst
}

// Bytes is the memory the scale holds.
func (s *ScaleState) Bytes() int { return 32 }

func decodeScale(b []byte) (*ScaleState, error) {
	d := room.Reader{B: b}
	s := &ScaleState{From: d.Varint(), To: d.Varint(), Since: d.Varint(), Recovery: d.Varint()}
	if d.Bad || len(d.B) != 0 || s.From <= 0 || s.From > ScaleUnit || s.To <= 0 || s.To > ScaleUnit || s.Recovery < 0 {
		return nil, ErrCorruptPolicy
	}
	return s, nil
}
