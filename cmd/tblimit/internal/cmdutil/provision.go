package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tblimit/tblimit/ledger"
)

// ErrResourceExists is CheckNewResource's answer for a resource that exists as it is.
var ErrResourceExists = errors.New("exists")

// CheckNewResource reports whether r may be created next to the resources
// all: ErrResourceExists if it exists as it is, an error if it clashes.
func CheckNewResource(r ledger.Resource, all []ledger.Resource) error {
	for _, old := range all {
		switch {
		case old.Ledger == r.Ledger && old == r:
			return ErrResourceExists
		case old.Ledger == r.Ledger:
			return fmt.Errorf("ledger %d already holds resource %s, which differs in %s; resources cannot be changed once created (create a new one on another ledger)",
				r.Ledger, old.Name, resourceDiff(old, r))
		case old.Name == r.Name:
			return fmt.Errorf("the name %q is taken by resource %s", r.Name, old)
		case old.Kind == ledger.KindMoney && old.Currency == r.Ledger:
			return fmt.Errorf("ledger %d is the currency ledger of resource %s", r.Ledger, old.Name)
		case r.Kind == ledger.KindMoney && r.Currency == old.Ledger:
			return fmt.Errorf("currency ledger %d is the limit ledger of resource %s", r.Currency, old.Name)
		}
	}
	return nil
}

// resourceDiff says how want differs from have.
func resourceDiff(have, want ledger.Resource) string {
	var d []string
	add := func(field string, h, w any) {
		if h != w {
			d = append(d, fmt.Sprintf("%s (%v, not %v)", field, h, w))
		}
	}
	add("name", have.Name, want.Name)
	add("kind", have.Kind, want.Kind)
	add("window", FormatWindow(have.Window), FormatWindow(want.Window))
	add("default limit", have.DefaultLimit, want.DefaultLimit)
	add("lazy", have.Lazy, want.Lazy)
	add("currency ledger", have.Currency, want.Currency)
	return strings.Join(d, ", ")
}

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
