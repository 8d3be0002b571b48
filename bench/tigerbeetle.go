package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/internal/launch"
	"github.com/tblimit/tblimit/ledger"
)

// server is a real tigerbeetle started by launch.Start for the run,
// without --development (whose 32 KiB request cap would make a benchmark
// meaningless): one replica, a fresh data file in a temporary directory
// under dir, a free loopback port. Stop stops it and removes its data.
type server struct {
	proc    *launch.Process
	dataDir string
}

// findServer returns the tigerbeetle binary to use, or "" with the reason
// when there is none. A binary that was named but is unusable is an error.
func findServer() (bin, notRun string, err error) {
	bin, err = launch.FindBinary("")
	if errors.Is(err, launch.ErrNoBinary) {
		return "", "no binary (set TIGERBEETLE_BIN)", nil
	}
	return bin, "", err
}

func launchServer(ctx context.Context, bin, dir string) (*server, error) {
	dataDir, err := os.MkdirTemp(dir, "tblimit-bench-")
	if err != nil {
		return nil, err
	}
	p, err := launch.Start(ctx, dataDir, launch.WithBinary(bin), launch.WithDevelopment(false))
	if err != nil {
		os.RemoveAll(dataDir)
		return nil, fmt.Errorf("%w (a production data file needs Direct I/O: choose a directory on a real disk with -tb-dir)", err)
	}
	return &server{proc: p, dataDir: dataDir}, nil
}

func (s *server) Stop() error {
	err := s.proc.Stop()
	if rerr := s.proc.Remove(); err == nil {
		err = rerr
	}
	if rerr := os.RemoveAll(s.dataDir); err == nil {
		err = rerr
	}
	return err
}

// client returns a new client of the server, counting what it sends.
func (s *server) client() (*countingClient, error) {
	c, err := tb.NewClient(tb.ToUint128(s.proc.ClusterID), s.proc.Addresses)
	if err != nil {
		return nil, err
	}
	return &countingClient{Client: c}, nil
}

// realContenders are tblimit and the raw client on the shared server. Each
// has one client for the whole run, shared by all its callers (the client
// batches their concurrent calls), and a new ledger per cell.
// The returned function closes their clients.
func realContenders(srv func() (*server, error), notRun string) ([]*contender, func()) {
	tbl := &contender{name: "tblimit/tigerbeetle", semantics: slidingLog, notRun: notRun, shared: true}
	tblc := &contender{name: "tblimit/tigerbeetle+coalesce", semantics: slidingLog, notRun: notRun, shared: true}
	tbll := &contender{name: "tblimit/tigerbeetle+leases", semantics: slidingBound, notRun: notRun, shared: true,
		leaseLifetime: leaseLifetime}
	raw := &contender{name: "raw client/tigerbeetle", semantics: slidingLog, notRun: notRun, shared: true}
	get, closeAll := clientsOf(srv)
	tblimitOn := func(name string, n int, opts ...ledger.Option) func(ctx context.Context, c cell) (*instance, error) {
		return func(ctx context.Context, c cell) (*instance, error) {
			tc, err := get(name)
			if err != nil {
				return nil, err
			}
			// ledger.New on a client it did not dial: Close leaves the client open.
			inst, err := tblimitSetup(ctx, ledger.New(tc, opts...), cellLedger(c, n), c)
			if err != nil {
				return nil, err
			}
			inst.ops = tc.ops
			return inst, nil
		}
	}
	tbl.setup = tblimitOn(tbl.name, 0)
	tblc.setup = tblimitOn(tblc.name, 2, ledger.WithCoalescing(0))
	tbll.setup = tblimitOn(tbll.name, 3, withLeases())
	raw.setup = func(ctx context.Context, c cell) (*instance, error) {
		tc, err := get(raw.name)
		if err != nil {
			return nil, err
		}
		inst, err := rawSetup(tc, cellLedger(c, 1), c)
		if err != nil {
			return nil, err
		}
		inst.ops = tc.ops
		return inst, nil
	}
	return []*contender{tbl, tblc, tbll, raw}, closeAll
}

// clientsOf returns get, which returns the client of srv's server named
// name, opening it the first time, and closeAll, which closes them all.
func clientsOf(srv func() (*server, error)) (get func(name string) (*countingClient, error), closeAll func()) {
	var mu sync.Mutex
	clients := map[string]*countingClient{}
	get = func(name string) (*countingClient, error) {
		mu.Lock()
		defer mu.Unlock()
		if c := clients[name]; c != nil {
			return c, nil
		}
		s, err := srv()
		if err != nil {
			return nil, err
		}
		c, err := s.client()
		if err != nil {
			return nil, err
		}
		clients[name] = c
		return c, nil
	}
	closeAll = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range clients {
			c.Close()
		}
	}
	return get, closeAll
}

// cellLedger gives each cell and contender its own ledger on the shared server.
func cellLedger(c cell, contender int) uint32 { return uint32(100 + 4*c.id + contender) }

// countingClient counts the calls of each operation and the events they
// carried, as sent by this process. The real client batches concurrent
// calls of one operation into one request by itself, so the server sees at
// most this many requests, and usually far fewer; how many it did see is
// not visible from here.
type countingClient struct {
	tb.Client
	createAccounts, createTransfers, lookupAccounts, getAccountTransfers counter
}

type counter struct{ calls, events atomic.Uint64 }

func (c *counter) add(n int) {
	c.calls.Add(1)
	c.events.Add(uint64(n))
}

func (c *counter) get() opCount { return opCount{Requests: c.calls.Load(), Events: c.events.Load()} }

func (c *countingClient) CreateAccounts(as []tb.Account) ([]tb.CreateAccountResult, error) {
	c.createAccounts.add(len(as))
	return c.Client.CreateAccounts(as)
}

func (c *countingClient) CreateTransfers(ts []tb.Transfer) ([]tb.CreateTransferResult, error) {
	c.createTransfers.add(len(ts))
	return c.Client.CreateTransfers(ts)
}

func (c *countingClient) LookupAccounts(ids []tb.Uint128) ([]tb.Account, error) {
	c.lookupAccounts.add(len(ids))
	return c.Client.LookupAccounts(ids)
}

func (c *countingClient) GetAccountTransfers(f tb.AccountFilter) ([]tb.Transfer, error) {
	c.getAccountTransfers.add(1)
	return c.Client.GetAccountTransfers(f)
}

func (c *countingClient) ops() map[string]opCount {
	return map[string]opCount{
		"create_accounts":       c.createAccounts.get(),
		"create_transfers":      c.createTransfers.get(),
		"lookup_accounts":       c.lookupAccounts.get(),
		"get_account_transfers": c.getAccountTransfers.get(),
	}
}
