package embedded

import (
	"encoding/binary"
	"math/bits"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// u128 is an unsigned 128-bit integer used for amounts and balances.
type u128 struct{ lo, hi uint64 }

var (
	u128Max  = u128{^uint64(0), ^uint64(0)}
	tbZero   tb.Uint128
	tbMaxInt = tb.Uint128(u128Max.bytes())
)

func toU128(v tb.Uint128) u128 {
	b := [16]byte(v)
	return u128{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}
}

func (a u128) bytes() [16]byte {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], a.lo)
	binary.LittleEndian.PutUint64(b[8:], a.hi)
	return b
}

func (a u128) tb() tb.Uint128 { return tb.Uint128(a.bytes()) }

// put stores a in *p, without building a copy first.
func (a u128) put(p *tb.Uint128) {
	binary.LittleEndian.PutUint64(p[:8], a.lo)
	binary.LittleEndian.PutUint64(p[8:], a.hi)
}

func (a u128) isZero() bool { return a.lo|a.hi == 0 }

// add returns a+b and whether the sum overflowed.
func (a u128) add(b u128) (u128, bool) {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, c := bits.Add64(a.hi, b.hi, c)
	return u128{lo, hi}, c != 0
}

// sub returns a-b; callers guarantee b <= a.
func (a u128) sub(b u128) u128 {
	lo, c := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, c)
	return u128{lo, hi}
}

// subSat returns a-b, or zero when b > a.
func (a u128) subSat(b u128) u128 {
	if a.less(b) {
		return u128{}
	}
	return a.sub(b)
}

func (a u128) less(b u128) bool {
	return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo)
}

func minU128(a, b u128) u128 {
	if b.less(a) {
		return b
	}
	return a
}

// hashID mixes both halves of an ID so that sequential, time-ordered and
// random IDs all spread evenly over a power-of-two table.
func hashID(id tb.Uint128) uint64 {
	b := [16]byte(id)
	lo := binary.LittleEndian.Uint64(b[:8])
	hi := binary.LittleEndian.Uint64(b[8:])
	h := lo ^ bits.RotateLeft64(hi*0x9E3779B97F4A7C15, 32)
	h ^= h >> 30
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 27
	h *= 0x94D049BB133111EB
	h ^= h >> 31
	return h
}
