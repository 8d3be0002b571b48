package ledger

import (
	"fmt"
	"strings"
)

// CheckNewResource says whether r may be created beside the resources
// that exist (as Resources reads them): exists is true when r exists as
// it is (creating it again changes nothing); the error, which is
// ErrResourceMismatch, names what clashes when r's ledger holds another
// definition, its name is another resource's, or its ledger or currency
// ledger is one that another resource uses for the other purpose.
// CreateResource itself refuses only a different definition on r's own
// ledger; operators' tools check the rest with this first.
func CheckNewResource(r Resource, existing []Resource) (exists bool, err error) {
	for _, old := range existing {
		switch {
		case old == r:
			return true, nil
		case old.Ledger == r.Ledger:
			return false, fmt.Errorf("%w: ledger %d already holds resource %s, which differs in %s; resources cannot be changed once created (create a new one on another ledger)",
				ErrResourceMismatch, r.Ledger, old.Name, resourceDiff(old, r))
		case old.Name == r.Name:
			return false, fmt.Errorf("%w: the name %q is taken by resource %s", ErrResourceMismatch, r.Name, old)
		case old.Kind == KindMoney && old.Currency == r.Ledger:
			return false, fmt.Errorf("%w: ledger %d is the currency ledger of resource %s", ErrResourceMismatch, r.Ledger, old.Name)
		case r.Kind == KindMoney && r.Currency == old.Ledger:
			return false, fmt.Errorf("%w: currency ledger %d is the limit ledger of resource %s", ErrResourceMismatch, r.Currency, old.Name)
		}
	}
	return false, nil
}

// resourceDiff says how want differs from have.
func resourceDiff(have, want Resource) string {
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
