package u128_test

import (
	"fmt"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/internal/u128"
)

func ExampleAdd() {
	sum, overflow := u128.Add(tb.ToUint128(40), tb.ToUint128(2))
	fmt.Println(sum.BigInt(), overflow)
	_, overflow = u128.Add(tb.AmountMax, tb.ToUint128(1))
	fmt.Println(overflow)
	// Output:
	// 42 false
	// true
}

func ExampleUint() {
	balance := u128.From(tb.ToUint128(100))
	balance, _ = balance.Add(u128.Uint{Lo: 20})
	if _, borrow := balance.Sub(u128.Uint{Lo: 200}); borrow {
		fmt.Println("200 is more than", balance.TB().BigInt())
	}
	// Output: 200 is more than 120
}
