package slot

// Count is the number of hash slots in a Redis Cluster keyspace.
const Count = 16384

// crc16Table is the CRC16-XMODEM (polynomial 0x1021) lookup table. It is
// built once and only read afterwards.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// CRC16 returns the CRC16-XMODEM checksum Redis Cluster uses for slots.
func CRC16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^c]
	}
	return crc
}

// HashTag returns the part of key that decides its slot: the bytes between
// the first '{' and the first '}' after it when that is non-empty, else the
// whole key.
func HashTag(key []byte) []byte {
	for i, c := range key {
		if c != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j == i+1 {
					return key
				}
				return key[i+1 : j]
			}
		}
		return key
	}
	return key
}

// Of returns the hash slot of key.
func Of(key []byte) int {
	return int(CRC16(HashTag(key)) & (Count - 1))
}
