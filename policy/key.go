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
//	rl:{<domain>}/<len>:<key>=<len>:<value>/…#<algorithm>
//
// Every key and value is length-prefixed, so no byte in them can make two
// descriptors share a key. A level matched through a share_threshold
// wildcard writes the pattern instead of the value, marked with '*' instead
// of ':' after its length ("=7*files/*"), so every value it matches counts
// against one counter, as in envoy.
//
// The hash tag is the domain: every counter one RL.CHECK touches (one
// domain, any number of descriptors) is in one slot, so checking them all
// at one instant and charging all or none is a single-slot apply, on one
// node of a cluster. The price is that a domain's traffic is served by one
// slot; split hot traffic over several domains. A domain containing '{' or
// '}' would break the tag, so such a domain is written as a tag of the
// FNV-1a hash of its name followed by the length-prefixed name.
//
// The rule itself is not in the key, only its algorithm: after a reload a
// rule whose descriptor path and algorithm are unchanged keeps counting on
// the same key (the algorithms document what a changed limit or window does
// to stored state), while a rule that switches algorithm starts on a fresh
// key instead of hitting a key of another type. Envoy's keys likewise carry
// the descriptor, not the limit.
func (r *Rule) AppendKey(dst []byte, entries []Entry) []byte {
	if r.prefix != "" {
		dst = appendEntries(append(dst, r.prefix...), entries, r.shared)
	} else {
		dst = appendDescriptor(dst, r.Domain, entries, r.shared)
	}
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

// appendDomainTag appends "rl:{<domain>}" (or its hashed form).
func appendDomainTag(dst []byte, domain string) []byte {
	dst = append(dst, "rl:{"...)
	if strings.ContainsAny(domain, "{}") {
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
