package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
	"github.com/tblimit/tblimit/ledger/simnet"
)

// modelledOps names what the modelled rows count: the requests their
// simnet.Client sent, concurrent calls merged as a real client merges them.
const modelledOps = "modelled requests"

// The rows on the real-server cost model (ledger/simnet, RealServer0179):
// each cell has a fresh embedded engine behind one simnet.Client shared by
// the cell's callers, as the real-server rows share one client. Setup
// (accounts, credits) runs on a free model, so that only the decisions pay
// the model's costs.
func modelledContenders() []*contender {
	raw := &contender{name: "raw client/modelled", semantics: slidingLog, inProcess: true,
		setup: func(ctx context.Context, c cell) (*instance, error) {
			return modelledSetup(func(sc *simnet.Client) (*instance, error) { return rawSetup(sc, 1, c) })
		}}
	tblimitOn := func(name string, sem semantics, opts ...ledger.Option) *contender {
		return &contender{name: name, semantics: sem, inProcess: true,
			setup: func(ctx context.Context, c cell) (*instance, error) {
				return modelledSetup(func(sc *simnet.Client) (*instance, error) {
					return tblimitSetup(ctx, ledger.New(sc, opts...), 1, c)
				})
			}}
	}
	leased := tblimitOn("tblimit/modelled+leases", slidingBound, withLeases())
	leased.leaseLifetime = leaseLifetime
	return []*contender{
		tblimitOn("tblimit/modelled", slidingLog),
		tblimitOn("tblimit/modelled+coalesce", slidingLog, ledger.WithCoalescing(0)),
		leased,
		raw,
	}
}

// modelledSetup runs setup on a simnet.Client of a fresh engine with a free
// model, then gives the client RealServer0179's costs.
func modelledSetup(setup func(*simnet.Client) (*instance, error)) (*instance, error) {
	e := embedded.New()
	sc := simnet.New(e, simnet.Model{Name: "setup"})
	closeAll := func() {
		sc.Close()
		e.Close()
	}
	inst, err := setup(sc)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("on the model: %w", err)
	}
	sc.SetModel(simnet.RealServer0179)
	inst.ops = func() map[string]opCount { return simnetOps(sc.Stats()) }
	inst.opsSource = modelledOps
	inst.model = func() modelCount {
		st := sc.Stats()
		return modelCount{busy: st.Busy, requests: st.Requests(), overran: st.Overran}
	}
	inst.close = closeAll
	return inst, nil
}

// modelCount is what a modelled client did so far.
type modelCount struct {
	busy              time.Duration
	requests, overran uint64
}

// simnetOps is what a simnet.Client sent: requests (merged calls) and events,
// by operation.
func simnetOps(s simnet.Stats) map[string]opCount {
	m := map[string]opCount{}
	for op := simnet.CreateAccounts; op <= simnet.GetChangeEvents; op++ {
		o := s.Ops[op]
		m[op.String()] = opCount{Requests: o.Requests, Events: o.Events}
	}
	return m
}
