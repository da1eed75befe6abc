package conc

import (
	"encoding/binary"
	"math/bits"
)

// fingerprint is a fixed, seedless 64-bit hash of a request id, stored with
// each lease so that a scan for an id compares one word per lease and runs
// the full byte comparison only on a match. Ids often share long prefixes
// ("req-000…", hosts, tenants), which makes plain string comparison walk most
// of every id. Being fixed, it never depends on the process, so it cannot
// make results differ between runs; a collision only costs one extra byte
// comparison, never a wrong answer.
func fingerprint(id []byte) uint64 {
	const (
		m1 = 0x9e3779b97f4a7c15
		m2 = 0xbf58476d1ce4e5b9
	)
	h := uint64(len(id)) * m1
	for len(id) >= 8 {
		h = mix(h^binary.LittleEndian.Uint64(id), m2)
		id = id[8:]
	}
	var tail [8]byte
	copy(tail[:], id)
	h = mix(h^binary.LittleEndian.Uint64(tail[:]), m2)
	return h ^ h>>31
}

// mix folds the full 128-bit product so every input bit reaches every output
// bit within a couple of rounds.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}
