package policy

import (
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/slot"
)

// AppendKey appends the counter key of this rule for a descriptor it
// matched (entries as given to Match) and returns the extended buffer. With
// a reused buffer it allocates nothing.
//
// The key is
//
//	rl:{<hash>}<len>:<domain>/<len>:<key>=<len>:<value>/…#<algorithm>
//
// Every name, key and value is length-prefixed, so no byte in them can make
// two descriptors share a key. A level matched through a share_threshold
// wildcard writes the pattern instead of the value, marked with '*' instead
// of ':' after its length ("=7*files/*"), so every value it matches counts
// against one counter, as in envoy.
//
// The hash tag is the 64-bit FNV-1a hash (16 hex digits) of the rest of the
// key: counters spread over the slots, so one busy domain is neither one
// lock nor one slot for a snapshot to copy. RL.CHECK locks every slot its
// counters (and the domain's overrides and scale, kept in the domain's own
// slot, see AppendDescriptorKey) are in, in slot order, and decides at one
// instant. CLUSTER KEYSLOT of a counter key is what any Redis client
// computes for it.
//
// The rule itself is not in the key, only its algorithm: after a reload a
// rule whose descriptor path and algorithm are unchanged keeps counting on
// the same key (the algorithms document what a changed limit or window does
// to stored state), while a rule that switches algorithm starts on a fresh
// key instead of hitting a key of another type. Envoy's keys likewise carry
// the descriptor, not the limit.
//
// A domain with a shard_key (the domain-level sluice extension) tags the
// counter of a descriptor that carries that entry with the slot of its
// value instead ("rl:{<slot.Tag>}…", four bytes, never sixteen hex
// digits): every counter of one value shares that slot — the slot a Redis
// client computes for the value as a key —, so a check by it is one group's
// and one apply in a sharded cluster.
func (r *Rule) AppendKey(dst []byte, entries []Entry) []byte {
	if r.shardKey != "" {
		for i, e := range entries {
			if e.Key != r.shardKey {
				continue
			}
			v := e.Value
			if i < len(r.shared) && r.shared[i] != "" {
				v = r.shared[i] // one counter for every value the pattern matches
			}
			// The value's slot, hashed where the key goes (no allocation).
			start := len(dst)
			tag := slot.Tag(slot.Of(append(dst, v...)[start:]))
			dst = append(dst[:start], "rl:{"...)
			dst = append(dst, tag[:]...)
			dst = append(dst, '}')
			return r.appendBody(dst, entries)
		}
	}
	dst = append(dst, "rl:{0123456789abcdef}"...)
	tag := len(dst) - 17
	body := len(dst)
	dst = r.appendBody(dst, entries)
	appendHex16(dst[tag:tag], fnv64aBytes(dst[body:]))
	return dst
}

// appendBody appends what follows a counter key's hash tag.
func (r *Rule) appendBody(dst []byte, entries []Entry) []byte {
	if r.prefix != "" {
		dst = append(dst, r.prefix...)
	} else {
		dst = appendLenPrefixed(dst, r.Domain, ':')
	}
	dst = appendEntries(dst, entries, r.shared)
	dst = append(dst, '#')
	return append(dst, r.Algorithm.String()...)
}

// AppendDescriptorKey appends the canonical bytes of a descriptor of a
// domain: the counter key without the algorithm, with every value as given.
// The override table is keyed by it.
func AppendDescriptorKey(dst []byte, domain string, entries []Entry) []byte {
	return appendDescriptor(dst, domain, entries, nil)
}

func appendDescriptor(dst []byte, domain string, entries []Entry, shared []string) []byte {
	return appendEntries(appendDomainTag(dst, domain), entries, shared)
}

// appendDomainTag appends "rl:{<domain>}": a domain's records are in the
// domain's own slot, the slot a cluster client routes RL.OVERRIDE <domain>
// and RL.SCALE <domain> by. A domain that holds braces, or is empty, cannot
// be its own tag ("{}" is no tag; "a{b}c" is in the slot of "b"), so its
// records are tagged with four bytes of the same slot (slot.Tag), then
// the domain, length-prefixed: "rl:{<tag>}5:a{b}c". A plain domain's
// records go on with '/' or '#' after the '}', never a digit, so the two
// forms never share a key.
func appendDomainTag(dst []byte, domain string) []byte {
	dst = append(dst, "rl:{"...)
	if !plainDomain(domain) {
		tag := slot.Tag(slot.Of([]byte(domain)))
		dst = append(dst, tag[:]...)
		dst = append(dst, '}')
		return appendLenPrefixed(dst, domain, ':')
	}
	dst = append(dst, domain...)
	return append(dst, '}')
}

// plainDomain reports a domain that is its own hash tag.
func plainDomain(domain string) bool {
	return domain != "" && !strings.ContainsAny(domain, "{}")
}

// LegacyDomainKey reads a key of a domain's record as versions before
// slot-tagged domain records wrote it for a domain holding braces or
// empty: "rl:{h<fnv64a of the domain, 16 hex>}<len>:<domain><rest>". It
// returns the key in today's layout (the same domain and rest), or false
// for any other key. Restore moves such records to their new key.
func LegacyDomainKey(key []byte) ([]byte, bool) {
	const head = len("rl:{h0123456789abcdef}")
	if len(key) < head+2 || string(key[:5]) != "rl:{h" || key[head-1] != '}' {
		return nil, false
	}
	i, n := head, 0
	for i < len(key) && key[i] >= '0' && key[i] <= '9' && n <= len(key) {
		n = n*10 + int(key[i]-'0')
		i++
	}
	if i == head || i >= len(key) || key[i] != ':' || n > len(key)-i-1 {
		return nil, false
	}
	domain := string(key[i+1 : i+1+n])
	if plainDomain(domain) || string(appendHex16(nil, fnv64a(domain))) != string(key[5:head-1]) {
		return nil, false
	}
	return append(appendDomainTag(nil, domain), key[i+1+n:]...), true
}

func appendEntries(dst []byte, entries []Entry, shared []string) []byte {
	for i, e := range entries {
		dst = append(dst, '/')
		dst = appendLenPrefixed(dst, e.Key, ':')
		dst = append(dst, '=')
		if i < len(shared) && shared[i] != "" {
			dst = appendLenPrefixed(dst, shared[i], '*')
		} else {
			dst = appendLenPrefixed(dst, e.Value, ':')
		}
	}
	return dst
}

func appendLenPrefixed(dst []byte, s string, mark byte) []byte {
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, mark)
	return append(dst, s...)
}

func appendHex16(dst []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, digits[(v>>uint(shift))&0xf])
	}
	return dst
}

// fnv64aBytes is fnv64a of b.
func fnv64aBytes(b []byte) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, c := range b {
		h ^= uint64(c)
		h *= prime
	}
	return h
}

// fnv64a is the 64-bit FNV-1a hash, written out so it allocates nothing.
func fnv64a(s string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}
