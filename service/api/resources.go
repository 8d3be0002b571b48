package api

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/tblimit/tblimit/ledger"
)

// resources finds resources by name. A resource cannot change once created,
// so a name found is kept for good; a name not found reads every resource
// again, one read shared by the calls that miss at once (so that a
// resource created a moment ago is found at once).
type resources struct {
	c    *ledger.Client
	read singleflight.Group

	mu     sync.Mutex // guards the fields below
	byName map[string][]ledger.Resource
	all    []ledger.Resource
}

func newResources(c *ledger.Client) *resources {
	return &resources{c: c, byName: map[string][]ledger.Resource{}}
}

// get finds a resource by name, or by ledger number as the CLI does.
func (rs *resources) get(ctx context.Context, name string) (ledger.Resource, error) {
	switch {
	case name == "":
		return ledger.Resource{}, fmt.Errorf("%w: resource is empty", errInvalid)
	case len(name) > ledger.MaxNameLen:
		// Neither a name nor a ledger number: not echoed back whole.
		return ledger.Resource{}, fmt.Errorf("%w: resource of %d bytes: a name has at most %d", ledger.ErrUnknownResource, len(name), ledger.MaxNameLen)
	}
	if r, ok, err := rs.find(name); ok || err != nil {
		return r, err
	}
	_, err, _ := rs.read.Do("", func() (any, error) {
		all, err := rs.c.Resources(ctx)
		if err != nil {
			return nil, err
		}
		rs.mu.Lock()
		defer rs.mu.Unlock()
		rs.all = all
		clear(rs.byName)
		for _, r := range all {
			rs.byName[r.Name] = append(rs.byName[r.Name], r)
		}
		return nil, nil
	})
	if err != nil {
		return ledger.Resource{}, err
	}
	if r, ok, err := rs.find(name); ok || err != nil {
		return r, err
	}
	return ledger.Resource{}, fmt.Errorf("%w %q", ledger.ErrUnknownResource, name)
}

// find looks name up in what was read.
func (rs *resources) find(name string) (ledger.Resource, bool, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch named := rs.byName[name]; len(named) {
	case 1:
		return named[0], true, nil
	case 0:
	default:
		return ledger.Resource{}, false, fmt.Errorf("%w: resource %q is ambiguous: ledgers %d and %d both have that name; give the ledger number",
			errInvalid, name, named[0].Ledger, named[1].Ledger)
	}
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		for _, r := range rs.all {
			if uint64(r.Ledger) == n {
				return r, true, nil
			}
		}
	}
	return ledger.Resource{}, false, nil
}
