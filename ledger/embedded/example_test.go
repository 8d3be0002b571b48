package embedded_test

import (
	"fmt"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
)

func ExampleNew() {
	// An engine is a tb.Client: no server needed.
	var client tb.Client = embedded.New()
	defer client.Close()

	bank, alice := tb.ToUint128(1), tb.ToUint128(2)
	_, _ = client.CreateAccounts([]tb.Account{
		{ID: bank, Ledger: 1, Code: 1},
		{ID: alice, Ledger: 1, Code: 1, Flags: tb.AccountFlags{DebitsMustNotExceedCredits: true}.ToUint16()},
	})
	// Alice gets 100, then tries to spend 60 twice.
	results, _ := client.CreateTransfers([]tb.Transfer{
		{ID: tb.ID(), DebitAccountID: bank, CreditAccountID: alice, Amount: tb.ToUint128(100), Ledger: 1, Code: 1},
		{ID: tb.ID(), DebitAccountID: alice, CreditAccountID: bank, Amount: tb.ToUint128(60), Ledger: 1, Code: 1},
		{ID: tb.ID(), DebitAccountID: alice, CreditAccountID: bank, Amount: tb.ToUint128(60), Ledger: 1, Code: 1},
	})
	for _, r := range results {
		fmt.Println(r.Status)
	}
	accounts, _ := client.LookupAccounts([]tb.Uint128{alice})
	fmt.Println("alice: credits", accounts[0].CreditsPosted.BigInt(), "debits", accounts[0].DebitsPosted.BigInt())
	// Output:
	// TransferCreated
	// TransferCreated
	// TransferExceedsCredits
	// alice: credits 100 debits 60
}
