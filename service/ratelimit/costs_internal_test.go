package ratelimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// What a server keeps for costs after the call follows the users of the
// last window: holds and debts past it are swept away as others come.
func TestCostStateIsSwept(t *testing.T) {
	var p provisional
	for i := range 1000 {
		p.push(fmt.Sprint("old", i), &ledger.Reservation{}, -2*time.Second) // already past its window
	}
	for i := range 300 {
		p.push(fmt.Sprint("new", i), &ledger.Reservation{}, time.Hour)
	}
	if n := len(p.m); n >= 400 {
		t.Fatalf("%d users with holds after 300 pushes, want the expired ones swept", n)
	}
	if p.pop("old1") != nil {
		t.Fatal("pop of a hold past its window = a hold, want nil")
	}
	if p.pop("new7") == nil || p.pop("new7") != nil {
		t.Fatal("pop of a live hold: want it once")
	}

	var d debts
	past := time.Now().Add(-time.Minute)
	for i := range 1000 {
		d.add(fmt.Sprint("old", i), 5, past)
	}
	for i := range 300 {
		d.add(fmt.Sprint("new", i), 5, time.Now().Add(time.Hour))
	}
	if n := len(d.m); n >= 1300 {
		t.Fatalf("%d debts kept, want the expired ones swept", n)
	}
	paid := false
	if err := d.pay("new3", func(owed uint64, until time.Time) (uint64, error) {
		paid = owed == 5
		return 5, nil
	}); err != nil || !paid || d.m["new3"] != nil {
		t.Fatalf("pay = %v, paid %v, left %v; want the debt of 5 paid and forgotten", err, paid, d.m["new3"])
	}
}
