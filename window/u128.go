package window

import "math/bits"

// u128 is an unsigned 128-bit integer: the counter compares products of
// counts and nanosecond durations, each factor below 2⁶³, so every product
// is below 2¹²⁶ and a sum of three stays below 2¹²⁸.
type u128 struct{ hi, lo uint64 }

// mul128 multiplies two non-negative int64s exactly.
func mul128(a, b int64) u128 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, carry := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, carry)
	return u128{hi, lo}
}

// sub returns x − y; the caller ensures x ≥ y.
func (x u128) sub(y u128) u128 {
	lo, borrow := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, borrow)
	return u128{hi, lo}
}

func (x u128) lessEq(y u128) bool {
	return x.hi < y.hi || (x.hi == y.hi && x.lo <= y.lo)
}

// div returns ⌊x / d⌋ for d > 0; the caller ensures the quotient is below
// 2⁶³ (which is exactly the condition bits.Div64 needs: x.hi < d).
func (x u128) div(d int64) int64 {
	q, _ := bits.Div64(x.hi, x.lo, uint64(d))
	return int64(q)
}
