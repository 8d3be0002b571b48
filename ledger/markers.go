package ledger

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/tblimit/tblimit/ledger/internal/status"
	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// markerAccounts are the two accounts of a ledger between which its key
// markers move nothing. They belong to no user, so that a marker can only
// fail with the rest of its chain, never on its own (which would spend its
// ID for ever).
func markerAccounts(ledger uint32) (ID, ID) {
	return derive(roleMarkerAccount, ledger, "a"), derive(roleMarkerAccount, ledger, "b")
}

// markerAccountsOf returns the accounts to create for the markers of a
// ledger.
func markerAccountsOf(ledger uint32) []tb.Account {
	a, b := markerAccounts(ledger)
	return []tb.Account{
		{ID: a.tb(), Ledger: ledger, Code: codeMarkers},
		{ID: b.tb(), Ledger: ledger, Code: codeMarkers},
	}
}

// ensureMarkers makes sure that ledger's marker accounts exist before a
// marker is sent on it: CreateResource creates them, but a resource created
// by an older version has none. Once per ledger and Client.
func (c *Client) ensureMarkers(ctx context.Context, ledger uint32) error {
	if _, ok := c.markers.Load(ledger); ok {
		return nil
	}
	res, err := c.conn.CreateAccounts(ctx, markerAccountsOf(ledger))
	if err != nil {
		return err
	}
	for i, s := range res {
		if !status.AccountMade(s.Status) {
			return fmt.Errorf("ledger: marker accounts of ledger %d: %w", ledger, accountStatusError(i, s.Status))
		}
	}
	c.markers.Store(ledger, true)
	return nil
}

// keyMarker is the marker of a request with ID key whose transfers are
// chain: nothing moves between the first's accounts, on its ledger; the
// first's amount is kept in user_data_64, and what the request is in
// user_data_128, so that the ID used again for a different request is
// refused.
func keyMarker(key ID, chain []tb.Transfer) tb.Transfer {
	first := chain[0]
	amount, _ := u64(first.Amount)
	a, b := markerAccounts(first.Ledger)
	// What the request is: an ID used again for another (other accounts,
	// another amount, another payee) finds the marker with other user
	// data. A single hold is named by its accounts, as markers always
	// were; a chain also by the accounts, amount and ledger of every
	// later transfer (a payment's payee).
	what := make([]byte, 48, 48+52*(len(chain)-1))
	copy(what[:16], key[:])
	debit, credit := first.DebitAccountID.Bytes(), first.CreditAccountID.Bytes()
	copy(what[16:32], debit[:])
	copy(what[32:], credit[:])
	for _, t := range chain[1:] {
		debit, credit, amount := t.DebitAccountID.Bytes(), t.CreditAccountID.Bytes(), t.Amount.Bytes()
		what = append(what, debit[:]...)
		what = append(what, credit[:]...)
		what = append(what, amount[:]...)
		what = binary.LittleEndian.AppendUint32(what, t.Ledger)
	}
	return tb.Transfer{
		ID:              derive(roleKeyMarker, 0, string(key[:])).tb(),
		DebitAccountID:  a.tb(),
		CreditAccountID: b.tb(),
		UserData128:     derive(roleKeyRequest, 0, string(what[:])).tb(),
		UserData64:      amount,
		Ledger:          first.Ledger,
		Code:            codeKeyMarker,
		Flags:           tb.TransferFlags{Linked: true}.ToUint16(),
	}
}
