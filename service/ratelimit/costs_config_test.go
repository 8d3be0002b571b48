package ratelimit

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/ledger"
)

// The keys of costs known after the call are read, and refused where a
// rule cannot take them, naming the line.
func TestConfigCostsAfter(t *testing.T) {
	c := mustParse(t, file{"ai.yaml", `
domain: ai
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 20000, charge_after: true}
  - key: model
    rate_limit: {unit: minute, requests_per_unit: 50000, reserve_key: check_id, settle_key: charge_id}
`})
	rules := c.Rules()
	if !rules[0].ChargeAfter || rules[0].ReserveKey != "" || rules[1].ChargeAfter || rules[1].ReserveKey != "check_id" || rules[1].SettleKey != "charge_id" {
		t.Fatalf("rules = %+v, %+v", rules[0], rules[1])
	}
	if d := describeRule(rules[0], ledger.Resource{}, false); !strings.Contains(d, " charge_after") {
		t.Errorf("describeRule = %q, want it to say charge_after", d)
	}
	if d := describeRule(rules[1], ledger.Resource{}, false); !strings.Contains(d, "reserve_key=check_id settle_key=charge_id") {
		t.Errorf("describeRule = %q, want it to name reserve_key and settle_key", d)
	}
	m, ok := c.lookup("ai", []Entry{{"model", "gpt"}})
	if !ok || m.rule != rules[1] {
		t.Fatalf("lookup(model) = %+v, %v", m, ok)
	}
	for _, bad := range []struct{ src, want string }{
		{`
domain: d
descriptors:
  - key: k
    rate_limit: {unlimited: true, charge_after: true}  # <-
`, "charge_after needs a limit"},
		{`
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 5, reserve_key: rid}  # <-
`, "reserve_key and settle_key go together"},
		{`
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 5, reserve_key: rid, settle_key: rid}  # <-
`, "is reserve_key too"},
		{`
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 5, charge_after: maybe}  # <-
`, "want true or false"},
		{`
domain: d
descriptors:
  - key: rid
    rate_limit: {unit: second, requests_per_unit: 5, reserve_key: rid, settle_key: sid}  # <-
`, "is a key of this rule's own descriptors"},
		{`
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 5, reserve_key: rid, settle_key: sid}
  - key: sid
    rate_limit: {unit: second, requests_per_unit: 5}  # <-
`, "names a request in domain"},
	} {
		_, err := parseFiles(file{"bad.yaml", bad.src})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseConfig(%s) = %v, want %q", bad.src, err, bad.want)
			continue
		}
		if line := markedLines(bad.src)[0]; !strings.Contains(err.Error(), "bad.yaml:"+strconv.Itoa(line)) {
			t.Errorf("ParseConfig(%s) = %v, want it at line %d", bad.src, err, line)
		}
	}
}
