package ledger

import (
	"fmt"
	"math"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Amounts: the rule every amount a caller gives follows (a Request's, a
// Payment's, a fund's), and how an amount or a balance that TigerBeetle
// keeps in 128 bits is read back in 64.

// validAmount checks an amount a caller asks for: at least 1 unit, and at
// most math.MaxInt64; else ErrInvalidAmount.
func validAmount(amount uint64) error {
	if amount == 0 {
		return fmt.Errorf("%w: 0 units", ErrInvalidAmount)
	}
	if amount > math.MaxInt64 {
		return fmt.Errorf("%w: %d units is more than %d", ErrInvalidAmount, amount, uint64(math.MaxInt64))
	}
	return nil
}

// u64 returns v if it fits in 64 bits.
func u64(v tb.Uint128) (uint64, bool) {
	lo, hi := v.Uint64()
	return lo, hi == 0
}
