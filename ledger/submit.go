package ledger

import (
	"context"
	"fmt"
	"sync"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// submit creates a chain of transfers and then looks up accounts, returning
// one result per transfer and the accounts as they were just after the chain
// (nil where not found).
//
// On a cluster the TigerBeetle client batches concurrent calls by itself.
// On an in-process engine, whose calls never block, concurrent submits are
// gathered into one create and one lookup by whichever caller arrives first
// (group commit): one engine lock per batch instead of two per decision. The
// accounts each caller gets are still its own snapshot: a batch's later
// transfers are taken out of what the lookup saw.
// Accounts not found are returned with a zero ID.
func (c *Client) submit(ctx context.Context, chain []tb.Transfer, accounts []ID) ([]tb.CreateTransferResult, []tb.Account, error) {
	if !c.inProcess {
		return c.submitRemote(ctx, chain, accounts)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, unavailable(err)
	}
	op := submissions.Get().(*submission)
	op.chain, op.accounts = chain, accounts
	c.batch.run(c, op)
	res, found, err := op.results, op.found, op.err
	*op = submission{done: op.done}
	submissions.Put(op)
	return res, found, err
}

// submitRemote sends the create and then the lookup from one goroutine
// under one deadline. Chains too large for one request take the general
// path, which splits them.
func (c *Client) submitRemote(ctx context.Context, chain []tb.Transfer, accounts []ID) ([]tb.CreateTransferResult, []tb.Account, error) {
	ids := make([]tb.Uint128, len(accounts))
	for i, id := range accounts {
		ids[i] = id.tb()
	}
	if len(chain) > c.createCap.size() || len(ids) > c.lookupCap.size() {
		res, err := c.createTransfers(ctx, chain)
		if err != nil {
			return nil, nil, err
		}
		found, err := lookup(ctx, c, ids, c.tb.LookupAccounts)
		if err != nil {
			return res, nil, err
		}
		return res, matchAccounts(accounts, found), nil
	}
	type answer struct {
		res   []tb.CreateTransferResult
		found []tb.Account
	}
	a, err := call(ctx, c, func() (answer, error) {
		res, err := c.tb.CreateTransfers(chain)
		if err != nil {
			return answer{}, err
		}
		found, err := c.tb.LookupAccounts(ids)
		return answer{res, found}, err
	})
	if err != nil {
		return nil, nil, err
	}
	if len(a.res) != len(chain) {
		return nil, nil, fmt.Errorf("ledger: create_transfers: %d results for %d transfers", len(a.res), len(chain))
	}
	for i := range a.res {
		if a.res[i].Status == tb.TransferExists {
			a.res[i].Status = tb.TransferCreated
		}
	}
	return a.res, matchAccounts(accounts, a.found), nil
}

var submissions = sync.Pool{New: func() any { return &submission{done: make(chan bool, 1)} }}

type submission struct {
	chain    []tb.Transfer
	accounts []ID

	results []tb.CreateTransferResult
	found   []tb.Account
	err     error
	done    chan bool // receives true when this submission must lead the next batch
}

// batcher gathers submissions while a batch is being applied.
type batcher struct {
	mu      sync.Mutex
	queue   []*submission
	leading bool

	// The leader's buffers, reused from batch to batch.
	chain []tb.Transfer
	uniq  []ID
	pos   map[ID]int
	later []tb.Uint128
}

func (b *batcher) run(c *Client, op *submission) {
	b.mu.Lock()
	b.queue = append(b.queue, op)
	if b.leading {
		b.mu.Unlock()
		if !<-op.done {
			return // a leader applied it
		}
		b.mu.Lock() // handed the lead: apply what is queued now, this one included
	}
	b.leading = true
	batch := b.queue
	b.queue = nil
	b.mu.Unlock()

	c.apply(b, batch)

	b.mu.Lock()
	if len(b.queue) == 0 {
		b.leading = false
		b.mu.Unlock()
	} else {
		next := b.queue[0]
		b.mu.Unlock()
		next.done <- true // lead stays taken; one waiting caller applies the next batch
	}
	for _, s := range batch {
		if s != op {
			s.done <- false
		}
	}
}

// apply runs a batch of submissions as one create and one lookup of the
// distinct accounts. Every submission's chain ends unlinked, so they stay
// independent. Only the leader calls it: b's buffers are reused.
func (c *Client) apply(b *batcher, batch []*submission) {
	if b.pos == nil {
		b.pos = make(map[ID]int)
	}
	clear(b.pos)
	chain, uniq := b.chain[:0], b.uniq[:0]
	for _, s := range batch {
		chain = append(chain, s.chain...)
		for _, id := range s.accounts {
			if _, ok := b.pos[id]; !ok {
				b.pos[id] = len(uniq)
				uniq = append(uniq, id)
			}
		}
	}
	b.chain, b.uniq = chain, uniq
	res, err := c.createTransfers(context.Background(), chain)
	var found []tb.Account
	if err == nil {
		found, err = c.lookupAccounts(context.Background(), uniq...)
	}
	if err != nil {
		for _, s := range batch {
			s.err = err
		}
		return
	}
	accounts := matchAccounts(uniq, found)
	// Walk the batch backwards, taking each submission's pending debits
	// out of the accounts before handing the earlier ones their snapshot.
	later := b.later[:0]
	for range uniq {
		later = append(later, tb.Uint128{})
	}
	b.later = later
	r := len(res)
	for i := len(batch) - 1; i >= 0; i-- {
		s := batch[i]
		r -= len(s.chain)
		s.results = res[r : r+len(s.chain) : r+len(s.chain)]
		s.found = make([]tb.Account, len(s.accounts))
		for j, id := range s.accounts {
			k := b.pos[id]
			s.found[j] = accounts[k]
			if later[k] != (tb.Uint128{}) {
				s.found[j].DebitsPending = sub128(s.found[j].DebitsPending, later[k])
			}
		}
		for j, t := range s.chain {
			if s.results[j].Status == tb.TransferCreated && t.TransferFlags().Pending {
				if k, ok := b.pos[fromTB(t.DebitAccountID)]; ok {
					later[k] = add128(later[k], t.Amount)
				}
			}
		}
	}
}

// matchAccounts lines up the accounts a lookup found with the IDs asked for
// (TigerBeetle answers in the order asked, leaving out those not found).
func matchAccounts(ids []ID, found []tb.Account) []tb.Account {
	out := make([]tb.Account, len(ids))
	j := 0
	for i, id := range ids {
		if j < len(found) && fromTB(found[j].ID) == id {
			out[i] = found[j]
			j++
		}
	}
	return out
}

func add128(a, b tb.Uint128) tb.Uint128 {
	alo, ahi := a.Uint64()
	blo, bhi := b.Uint64()
	lo := alo + blo
	hi := ahi + bhi
	if lo < alo {
		hi++
	}
	return u128(lo, hi)
}

func sub128(a, b tb.Uint128) tb.Uint128 {
	alo, ahi := a.Uint64()
	blo, bhi := b.Uint64()
	lo := alo - blo
	hi := ahi - bhi
	if alo < blo {
		hi--
	}
	return u128(lo, hi)
}

func u128(lo, hi uint64) tb.Uint128 {
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(lo >> (8 * i))
		b[8+i] = byte(hi >> (8 * i))
	}
	return tb.BytesToUint128(b)
}
