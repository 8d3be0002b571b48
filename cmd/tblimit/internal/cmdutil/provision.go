package cmdutil

import (
	"context"

	"github.com/tblimit/tblimit/ledger"
)

// Provision provisions users in batches that fit one request, and calls
// done after each batch users[i:j] with its error; done's error ends it.
func Provision(ctx context.Context, c *ledger.Client, r ledger.Resource, users []ledger.UserLimit, done func(i, j int, err error) error) error {
	per := ledger.BatchMax
	if r.Kind == ledger.KindMoney {
		per = ledger.BatchMax / 2 // two accounts per user
	}
	for i := 0; i < len(users); i += per {
		j := min(i+per, len(users))
		if err := done(i, j, c.Provision(ctx, r, users[i:j]...)); err != nil {
			return err
		}
	}
	return nil
}
