package slot

import (
	"strconv"
	"strings"
)

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

// Tag returns four bytes whose slot is s (0 ≤ s < Count): a hash tag
// "{"+Tag(s)+"}" puts a key in slot s. The bytes are '@' to 'O' (0x40 |
// a nibble), never a brace. A record that belongs in the slot of a name
// that cannot be its own tag (one holding braces, or empty) is keyed with
// this.
//
// With no initial value and no final xor, CRC16 is linear over GF(2), and
// 0x40|nibble is 0x40 xor nibble, so the slot of the four bytes is a fixed
// slot xor a linear map of the 16 nibble bits; that map reaches all 14 slot
// bits, and tagBasis inverts it.
func Tag(s int) [4]byte {
	t := uint16(s&(Count-1)) ^ tagBasis.base
	var d uint16
	for bit := range 14 {
		if t>>bit&1 == 1 {
			d ^= tagBasis.by[bit]
		}
	}
	return tagBytes(d)
}

func tagBytes(d uint16) [4]byte {
	return [4]byte{0x40 | byte(d>>12&15), 0x40 | byte(d>>8&15), 0x40 | byte(d>>4&15), 0x40 | byte(d&15)}
}

// tagBasis holds, for each slot bit, nibbles whose tag moves exactly that
// bit of the slot, and the slot of the all-zero tag ("@@@@"). Built once
// and only read afterwards.
var tagBasis = func() (b struct {
	base uint16
	by   [14]uint16
}) {
	slotOf := func(d uint16) uint16 { t := tagBytes(d); return CRC16(t[:]) & (Count - 1) }
	b.base = slotOf(0)
	// Gauss-Jordan elimination over the 16 unit nibble vectors: rows are
	// (slot bits moved, nibbles that move them).
	type row struct{ bits, d uint16 }
	var rows []row
	for j := range 16 {
		rows = append(rows, row{slotOf(1<<j) ^ b.base, 1 << j})
	}
	for bit := range 14 {
		p := -1
		for i := bit; i < len(rows); i++ {
			if rows[i].bits>>bit&1 == 1 {
				p = i
				break
			}
		}
		if p < 0 {
			panic("slot: the tag map does not reach every slot")
		}
		rows[bit], rows[p] = rows[p], rows[bit]
		for i := range rows {
			if i != bit && rows[i].bits>>bit&1 == 1 {
				rows[i].bits ^= rows[bit].bits
				rows[i].d ^= rows[bit].d
			}
		}
	}
	for bit := range 14 {
		b.by[bit] = rows[bit].d
	}
	return b
}()

// ParseRange reads a slot range, "from-to" or one slot, in 0..Count-1.
func ParseRange(s string) (from, to int, ok bool) {
	a, b, isRange := strings.Cut(s, "-")
	if !isRange {
		b = a
	}
	from, err1 := strconv.Atoi(a)
	to, err2 := strconv.Atoi(b)
	ok = err1 == nil && err2 == nil && a != "" && b != "" && a[0] != '+' && b[0] != '+' &&
		0 <= from && from <= to && to < Count
	return from, to, ok
}

// FormatRanges writes ranges as ParseRanges reads them: "from-to" joined
// by commas ("" for none).
func FormatRanges(ranges [][2]int) string {
	var b strings.Builder
	for i, r := range ranges {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r[0]))
		b.WriteByte('-')
		b.WriteString(strconv.Itoa(r[1]))
	}
	return b.String()
}

// ParseRanges reads what FormatRanges wrote.
func ParseRanges(s string) ([][2]int, bool) {
	if s == "" {
		return nil, true
	}
	var out [][2]int
	for _, part := range strings.Split(s, ",") {
		from, to, ok := ParseRange(part)
		if !ok {
			return nil, false
		}
		out = append(out, [2]int{from, to})
	}
	return out, true
}
