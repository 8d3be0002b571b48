package ledger

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

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
		if !accountMade(s.Status) {
			return fmt.Errorf("ledger: marker accounts of ledger %d: %w", ledger, accountStatusError(i, s.Status))
		}
	}
	c.markers.Store(ledger, true)
	return nil
}

// newAttempt makes o a new attempt after the cluster answered it: a transfer
// whose ID TigerBeetle spent (it failed on its own, and a failed ID answers
// id_already_failed for ever) gets a new one. A request with a caller's ID
// whose first transfer (the one that bears the ID) was spent goes from then
// on as the ID's marker followed by every transfer new, each carrying the
// ID in user_data_128. The marker is a transfer of nothing whose ID is
// derived from the request's, linked to the rest: created only with it.
// A later admission under the ID finds the marker first and fails whole
// (TigerBeetle answers exists), so that an ID is admitted at most once,
// while a denial leaves the marker unspent for the next attempt.
func (o *op) newAttempt() {
	res := o.res
	o.reset()
	kept := func(i int) bool {
		return res != nil && (classify(res[i].Status) == outAdmitted || classify(res[i].Status) == outLinked)
	}
	if !o.key.IsZero() && !o.marked && !kept(0) {
		marker := keyMarker(o.key, o.chain)
		for i := range o.chain {
			if !kept(i) {
				o.chain[i].ID = NewID().tb()
			}
			o.chain[i].UserData128 = o.key.tb()
		}
		o.chain = slices.Insert(o.chain, 0, marker)
		for i := range o.events {
			o.events[i].i++
		}
		o.marked = true
		return
	}
	for i := range o.chain {
		if o.marked && i == 0 {
			continue // the marker is never spent: it only fails with the rest
		}
		if !kept(i) {
			o.chain[i].ID = NewID().tb()
		}
	}
	if first := o.firstHold(); o.key.IsZero() && first >= 0 {
		// An unnamed request is named by its first hold: the others carry
		// that name, new or not.
		for i := first + 1; i < len(o.chain); i++ {
			o.chain[i].UserData128 = o.chain[first].ID
		}
	}
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
