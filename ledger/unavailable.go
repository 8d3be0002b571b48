package ledger

import (
	"errors"

	"github.com/tblimit/tblimit/ledger/internal/view"
)

// unavailableDecisions applies the Client's OnUnavailable to o, whose answer did
// not come: one Decision per deciding hold, and the error to return.
func (c *Client) unavailableDecisions(o *op, err error) ([]Decision, error) {
	if !errors.Is(err, ErrUnavailable) {
		return nil, err
	}
	// A call that coalescing may have merged into a transfer shared with
	// others has no name of its own to be retried by.
	var name ID
	if !(o.merge && c.coalesce) {
		name = o.name()
	}
	var ds []Decision
	for _, e := range o.events {
		if e.decide {
			ds = append(ds, c.unanswered(name, o.payment))
		}
	}
	if c.unavailable == ReturnError || o.payment {
		if name.IsZero() {
			return ds, err
		}
		return ds, &attemptError{id: name, err: err}
	}
	return ds, nil
}

// unanswered is the Decision for a call the cluster did not answer (id:
// the attempt's name, zero if it has none): what the Client's OnUnavailable
// makes of it, but a payment is never made open. Nothing was learnt of the
// user: it reports no numbers, and no Timestamp.
func (c *Client) unanswered(id ID, payment bool) Decision {
	return decisionOf(view.Report{}, c.unavailable == FailOpen && !payment, Unavailable, id, 0)
}
