package ledger

import (
	"context"

	"github.com/tblimit/tblimit/ledger/internal/status"
	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Reset gives back at once every unit user key holds on r: it voids each
// hold in flight, as Reservation.Cancel does, so that the units are
// available again. It is an operator's act, and the audit trail shows it: a
// void per hold. It returns how many holds it ended. Units taken while it
// runs are not given back.
func (c *Client) Reset(ctx context.Context, r Resource, key string) (int, error) {
	uid, _, err := c.account(ctx, r, key)
	if err != nil {
		return 0, err
	}
	flights, err := c.readFlights(ctx, uid, maxTimeout(r.Window), c.clusterNow(), 0, true)
	if err != nil {
		return 0, err
	}
	key, _ = NormalizeKey(key) // c.account accepted it
	u := c.users.get(r, key)
	ended := 0
	for len(flights) > 0 {
		part := flights[:min(len(flights), maxLowerPosts)]
		flights = flights[len(part):]
		steps := make([]step, len(part))
		for i, f := range part {
			steps[i] = step{User: u, T: tb.Transfer{
				ID:              endID(roleCancel, f.id).tb(),
				PendingID:       f.id.tb(),
				DebitAccountID:  uid.tb(),
				CreditAccountID: OperatorID(r.Ledger).tb(),
				Ledger:          r.Ledger,
				Code:            f.code,
				Flags:           tb.TransferFlags{VoidPendingTransfer: true}.ToUint16(),
			}}
		}
		res, err := c.send(ctx, &opSpec{}, steps)
		if err != nil {
			return ended, err
		}
		for _, s := range res {
			if status.ClassifyEnd(s.Status) == status.EndedNow { // else expired or ended meanwhile: nothing to give back
				ended++
			}
		}
	}
	return ended, nil
}
