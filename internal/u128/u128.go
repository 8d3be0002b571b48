// Package u128 is unsigned 128-bit arithmetic for TigerBeetle's amounts,
// balances and IDs.
//
// The functions Add, Sub, Cmp and FromParts work on tb.Uint128, the 16
// little-endian bytes the client sends and stores. Uint is the same
// arithmetic on two uint64 halves, for code that computes much and converts
// rarely: convert with From and Uint.TB. Nothing panics: additions report
// overflow and subtractions a borrow, and their results wrap around.
package u128

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"
	"strconv"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Uint is an unsigned 128-bit integer: Hi<<64 + Lo. The zero value is 0.
type Uint struct{ Lo, Hi uint64 }

// Max is the largest Uint, 2^128 - 1.
var Max = Uint{math.MaxUint64, math.MaxUint64}

// From returns v as a Uint.
func From(v tb.Uint128) Uint {
	return Uint{binary.LittleEndian.Uint64(v[:8]), binary.LittleEndian.Uint64(v[8:])}
}

// TB returns a as a tb.Uint128.
func (a Uint) TB() tb.Uint128 {
	var v tb.Uint128
	a.Put(&v)
	return v
}

// Put stores a in *p, which saves a copy where p is a field of a larger
// struct.
func (a Uint) Put(p *tb.Uint128) {
	binary.LittleEndian.PutUint64(p[:8], a.Lo)
	binary.LittleEndian.PutUint64(p[8:], a.Hi)
}

// IsZero reports whether a is 0.
func (a Uint) IsZero() bool { return a.Lo|a.Hi == 0 }

// Cmp returns -1, 0 or +1 as a is less than, equal to or greater than b.
func (a Uint) Cmp(b Uint) int {
	if a.Hi != b.Hi {
		if a.Hi < b.Hi {
			return -1
		}
		return 1
	}
	switch {
	case a.Lo < b.Lo:
		return -1
	case a.Lo > b.Lo:
		return 1
	}
	return 0
}

// Add returns a+b and whether the sum overflowed (it is then a+b-2^128).
func (a Uint) Add(b Uint) (sum Uint, overflow bool) {
	lo, c := bits.Add64(a.Lo, b.Lo, 0)
	hi, c := bits.Add64(a.Hi, b.Hi, c)
	return Uint{lo, hi}, c != 0
}

// Sub returns a-b and whether it borrowed, b being greater than a (the
// difference is then a-b+2^128).
func (a Uint) Sub(b Uint) (diff Uint, borrow bool) {
	lo, c := bits.Sub64(a.Lo, b.Lo, 0)
	hi, c := bits.Sub64(a.Hi, b.Hi, c)
	return Uint{lo, hi}, c != 0
}

// FromParts returns the tb.Uint128 hi<<64 + lo.
func FromParts(lo, hi uint64) tb.Uint128 { return Uint{lo, hi}.TB() }

// Add returns a+b and whether the sum overflowed (it then wraps around).
func Add(a, b tb.Uint128) (tb.Uint128, bool) {
	sum, overflow := From(a).Add(From(b))
	return sum.TB(), overflow
}

// Sub returns a-b and whether it borrowed, b being greater than a (the
// difference then wraps around).
func Sub(a, b tb.Uint128) (tb.Uint128, bool) {
	diff, borrow := From(a).Sub(From(b))
	return diff.TB(), borrow
}

// Cmp returns -1, 0 or +1 as a is less than, equal to or greater than b.
func Cmp(a, b tb.Uint128) int { return From(a).Cmp(From(b)) }

// Decimal writes v in decimal (tb.Uint128's String is hexadecimal).
func Decimal(v tb.Uint128) string {
	a := From(v)
	if a.Hi == 0 {
		return strconv.FormatUint(a.Lo, 10)
	}
	n := new(big.Int).SetUint64(a.Hi)
	n.Lsh(n, 64)
	return n.Or(n, new(big.Int).SetUint64(a.Lo)).String()
}
