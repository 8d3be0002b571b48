package simnet

import tb "github.com/tigerbeetle/tigerbeetle-go"

// The tb.Client methods. Each builds a call whose apply runs the wrapped
// client's method and keeps its answer; the call's events are applied on
// their own (their own batch of the request, as the server applies each
// batch of a multi-batch request), so a linked chain never spans callers.

// CreateAccounts creates accounts, one result per account.
func (c *Client) CreateAccounts(accounts []tb.Account) ([]tb.CreateAccountResult, error) {
	var res []tb.CreateAccountResult
	err := c.do(&call{op: CreateAccounts, events: len(accounts), results: len(accounts), apply: func() (outcome, error) {
		r, err := c.tb.CreateAccounts(accounts)
		res = r
		o := outcome{}
		for _, x := range r {
			if x.Status == tb.AccountCreated {
				o.done++
			} else {
				o.failed++
			}
		}
		return o, err
	}})
	return answer(res, err)
}

// CreateTransfers creates transfers, one result per transfer.
func (c *Client) CreateTransfers(transfers []tb.Transfer) ([]tb.CreateTransferResult, error) {
	var res []tb.CreateTransferResult
	err := c.do(&call{op: CreateTransfers, events: len(transfers), results: len(transfers), apply: func() (outcome, error) {
		r, err := c.tb.CreateTransfers(transfers)
		res = r
		o := outcome{}
		for _, x := range r {
			if x.Status == tb.TransferCreated {
				o.done++
			} else {
				o.failed++
			}
		}
		return o, err
	}})
	return answer(res, err)
}

// LookupAccounts looks accounts up by ID.
func (c *Client) LookupAccounts(ids []tb.Uint128) ([]tb.Account, error) {
	return lookup(c, LookupAccounts, ids, c.tb.LookupAccounts)
}

// LookupTransfers looks transfers up by ID.
func (c *Client) LookupTransfers(ids []tb.Uint128) ([]tb.Transfer, error) {
	return lookup(c, LookupTransfers, ids, c.tb.LookupTransfers)
}

// GetAccountTransfers returns an account's transfers that match filter.
func (c *Client) GetAccountTransfers(filter tb.AccountFilter) ([]tb.Transfer, error) {
	return query(c, GetAccountTransfers, filter.Limit, func() ([]tb.Transfer, error) { return c.tb.GetAccountTransfers(filter) })
}

// GetAccountBalances returns an account's balances that match filter.
func (c *Client) GetAccountBalances(filter tb.AccountFilter) ([]tb.AccountBalance, error) {
	return query(c, GetAccountBalances, filter.Limit, func() ([]tb.AccountBalance, error) { return c.tb.GetAccountBalances(filter) })
}

// QueryAccounts returns the accounts that match filter.
func (c *Client) QueryAccounts(filter tb.QueryFilter) ([]tb.Account, error) {
	return query(c, QueryAccounts, filter.Limit, func() ([]tb.Account, error) { return c.tb.QueryAccounts(filter) })
}

// QueryTransfers returns the transfers that match filter.
func (c *Client) QueryTransfers(filter tb.QueryFilter) ([]tb.Transfer, error) {
	return query(c, QueryTransfers, filter.Limit, func() ([]tb.Transfer, error) { return c.tb.QueryTransfers(filter) })
}

// GetChangeEvents returns the change events that match filter. The client
// never merges these calls: each is a request of its own.
func (c *Client) GetChangeEvents(filter tb.ChangeEventsFilter) ([]tb.ChangeEvent, error) {
	return query(c, GetChangeEvents, filter.Limit, func() ([]tb.ChangeEvent, error) { return c.tb.GetChangeEvents(filter) })
}

// Nop costs a round trip (and the first one the session's registration,
// Model.Register), as the real client's, which goes to the cluster, and
// then goes to the wrapped client. It fails once the Client is closed.
func (c *Client) Nop() error {
	c.mu.Lock()
	closed, m := c.closed, c.model
	c.mu.Unlock()
	if closed {
		return tb.ErrClientClosed
	}
	cost := m.RoundTrip
	if !c.registered.Swap(true) {
		cost += m.Register
	}
	c.clk.SleepUntil(c.clk.Now().Add(cost), c.closing)
	return c.tb.Nop()
}

func lookup[T any](c *Client, op Op, ids []tb.Uint128, f func([]tb.Uint128) ([]T, error)) ([]T, error) {
	var res []T
	err := c.do(&call{op: op, events: len(ids), results: len(ids), apply: func() (outcome, error) {
		r, err := f(ids)
		res = r
		return outcome{done: len(ids)}, err
	}})
	return answer(res, err)
}

func query[T any](c *Client, op Op, limit uint32, f func() ([]T, error)) ([]T, error) {
	var res []T
	err := c.do(&call{op: op, events: 1, results: shapes[op].queryResults(limit), apply: func() (outcome, error) {
		r, err := f()
		res = r
		return outcome{done: len(r)}, err
	}})
	return answer(res, err)
}

func answer[T any](res []T, err error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	return res, nil
}
