package machine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/slot"
)

// Digest is a hash of everything a future reply can depend on: the applied
// instant and, slot by slot in slot order and within a slot in key order,
// every key live at that instant with its kind, word and encoded state.
// Two machines have equal digests exactly when they hold the same live
// keys in the same order with the same states at the same instant. Expired
// records not yet swept are left out (they read as absent), so sweeping
// never changes it. It is 40 hex characters, as Redis' DEBUG DIGEST.
//
// Each slot is read under its lock; on a machine applying concurrently the
// digest is of no single instant, so compare digests of idle machines.
func (m *Machine) Digest() (string, error) {
	h := sha256.New()
	applied := m.applied.Load()
	var buf []byte
	buf = binary.LittleEndian.AppendUint64(buf, uint64(applied))
	h.Write(buf)
	for i := range slot.Count {
		s := m.keys.Lock(i)
		var err error
		buf = buf[:0]
		s.Keys(applied, func(key []byte, e keyspace.Entry) bool {
			buf = binary.LittleEndian.AppendUint16(buf, uint16(i))
			buf = append(buf, byte(e.Kind()))
			buf = binary.AppendUvarint(buf, uint64(len(key)))
			buf = append(buf, key...)
			buf = binary.LittleEndian.AppendUint64(buf, uint64(s.Word(e)))
			n := len(buf)
			buf = append(buf, 0, 0, 0, 0)
			if buf, err = AppendState(buf, s, e); err != nil {
				err = fmt.Errorf("key %q: %w", key, err)
				return false
			}
			binary.LittleEndian.PutUint32(buf[n:], uint32(len(buf)-n-4))
			return true
		})
		s.Unlock()
		if err != nil {
			return "", err
		}
		h.Write(buf)
	}
	return hex.EncodeToString(h.Sum(nil)[:20]), nil
}
