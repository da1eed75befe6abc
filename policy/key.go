package policy

import (
	"strconv"
	"strings"
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
func (r *Rule) AppendKey(dst []byte, entries []Entry) []byte {
	dst = append(dst, "rl:{0123456789abcdef}"...)
	tag := len(dst) - 17
	body := len(dst)
	if r.prefix != "" {
		dst = append(dst, r.prefix...)
	} else {
		dst = appendLenPrefixed(dst, r.Domain, ':')
	}
	dst = appendEntries(dst, entries, r.shared)
	dst = append(dst, '#')
	dst = append(dst, r.Algorithm.String()...)
	appendHex16(dst[tag:tag], fnv64aBytes(dst[body:]))
	return dst
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

// appendDomainTag appends "rl:{<domain>}", or its hashed form for a domain
// that holds braces or is empty: "{}" is no hash tag, so the records of the
// empty domain would each land in a slot of their own, and a listing of the
// domain's slot would miss them.
func appendDomainTag(dst []byte, domain string) []byte {
	dst = append(dst, "rl:{"...)
	if domain == "" || strings.ContainsAny(domain, "{}") {
		dst = append(dst, 'h')
		dst = appendHex16(dst, fnv64a(domain))
		dst = append(dst, '}')
		dst = appendLenPrefixed(dst, domain, ':')
	} else {
		dst = append(dst, domain...)
		dst = append(dst, '}')
	}
	return dst
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
