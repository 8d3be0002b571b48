package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAPIRows sets the rows of tblimit.v1 and of Pay in process up on the
// embedded engine on a tiny cell and decides on it: each admits exactly the
// limit of the key it is asked about (a payment too: its funds are twice the
// limit), and counts what its ledger.Client sent. The rows run only when
// named, on the warm workloads only for the pay rows, and not without a
// whole Envoy unit for those served.
func TestAPIRows(t *testing.T) {
	rows, closeRows := apiContenders(time.Minute, nil, "no binary")
	defer closeRows()
	keys := []string{"user-0", "user-1", "user-2"}
	for _, c := range rows {
		if !c.onlyNamed {
			t.Errorf("%s runs without being named", c.name)
		}
		if got, want := c.warmOnly, strings.Contains(c.name, "pay/"); got != want {
			t.Errorf("%s: warm workloads only = %v, want %v", c.name, got, want)
		}
		if strings.HasSuffix(c.name, "/tigerbeetle") {
			if c.notRun != "no binary" {
				t.Errorf("%s without a real server: not run %q, want the reason given", c.name, c.notRun)
			}
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			inst := smallCell(t, c, keys)
			for _, k := range []struct{ key, calls, want int }{{0, 10, 3}, {1, 2, 2}, {0, 1, 0}} {
				admitted := 0
				for range k.calls {
					ok, err := inst.allow(context.Background(), k.key)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						admitted++
					}
				}
				if admitted != k.want {
					t.Errorf("%d calls for key %d: admitted %d, want %d", k.calls, k.key, admitted, k.want)
				}
			}
			if inst.clientOps()["create_transfers"].Events == 0 {
				t.Errorf("client ops %+v: no transfer counted", inst.clientOps())
			}
		})
	}
	rows, _ = apiContenders(2*time.Second, nil, "")
	for _, c := range rows {
		served := strings.HasPrefix(c.name, "tblimit api")
		if got := strings.Contains(c.notRun, "no whole Envoy unit"); got != served {
			t.Errorf("%s with a window of 2s: not run %q; want no whole unit: %v", c.name, c.notRun, served)
		}
	}
	for _, p := range apiPairs() {
		for _, name := range p {
			if !slices.ContainsFunc(rows, func(c *contender) bool { return c.name == name }) &&
				!slices.ContainsFunc(serveRows, func(s struct{ name, inProcess string }) bool { return s.name == name || s.inProcess == name }) {
				t.Errorf("ratio %s ÷ %s: no row %q", p[0], p[1], name)
			}
		}
	}
}
