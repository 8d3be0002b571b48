package embedded

import (
	"encoding/binary"
	"math/bits"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/internal/u128"
)

// Amounts and balances are u128.Uint: two halves to compute with, converted
// from and to tb.Uint128 only at the edges.

var (
	tbZero   tb.Uint128
	tbMaxInt = tb.AmountMax
)

// subSat returns a-b, or zero when b > a.
func subSat(a, b u128.Uint) u128.Uint {
	d, borrow := a.Sub(b)
	if borrow {
		return u128.Uint{}
	}
	return d
}

// overflows reports whether a+b overflows.
func overflows(a, b u128.Uint) bool {
	_, o := a.Add(b)
	return o
}

// hashID mixes both halves of an ID so that sequential, time-ordered and
// random IDs all spread evenly over a power-of-two table.
func hashID(id tb.Uint128) uint64 {
	lo := binary.LittleEndian.Uint64(id[:8])
	hi := binary.LittleEndian.Uint64(id[8:])
	h := lo ^ bits.RotateLeft64(hi*0x9E3779B97F4A7C15, 32)
	h ^= h >> 30
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 27
	h *= 0x94D049BB133111EB
	h ^= h >> 31
	return h
}
