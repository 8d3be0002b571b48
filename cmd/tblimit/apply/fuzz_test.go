package apply

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/internal/yamlpos"
	"github.com/tblimit/tblimit/ledger"
)

// The fuzz targets of the command line's parsers and readers. Each checks,
// besides not panicking, that what is accepted round-trips or follows the
// documented rule, and that what is refused says where: the input quoted,
// or file:line. Their seed corpora are in testdata/fuzz; `go test` runs them
// as tests, `go test -fuzz=FuzzX -run=^$` explores.

// applyYAML writes resources as an apply file.
func applyYAML(t *testing.T, rs []fileResource) string {
	t.Helper()
	type user struct {
		Key   string  `yaml:"key"`
		Limit *uint64 `yaml:"limit,omitempty"`
	}
	type resource struct {
		Name         string `yaml:"name"`
		Kind         string `yaml:"kind"`
		Ledger       uint32 `yaml:"ledger"`
		Currency     uint32 `yaml:"currency,omitempty"`
		Window       string `yaml:"window"`
		DefaultLimit uint64 `yaml:"default_limit"`
		Lazy         bool   `yaml:"lazy"`
		Users        []user `yaml:"users,omitempty"`
	}
	var doc struct {
		Resources []resource `yaml:"resources"`
	}
	doc.Resources = []resource{}
	for _, r := range rs {
		out := resource{Name: r.Name, Kind: r.Kind.String(), Ledger: r.Ledger, Currency: r.Currency, Window: cmdutil.FormatWindow(r.Window), DefaultLimit: r.DefaultLimit, Lazy: r.Lazy}
		for _, u := range r.users {
			out.Users = append(out.Users, user{u.key, u.limit})
		}
		doc.Resources = append(doc.Resources, out)
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func FuzzParseApplyFile(f *testing.F) {
	f.Add("resources:\n  - {name: api, kind: requests, ledger: 1, window: 1m, default_limit: 5, users: [{key: a, limit: 3}]}\n")
	f.Add("resources:\n  - name: usd\n    kind: money\n    ledger: 3\n    currency: 840\n    window: 1d\n    default_limit: 100\n")
	f.Add("resources: []\n")
	f.Add("- a\n")
	f.Add("resources:\n  - name: x\n   kind: y\n")
	f.Add("resources:\n  - name: api\n    kind: requests\n    ledger: 1\n    window: 1d12h\n    default_limit: 1_000\n    lazy: yes\n    users:\n      - {key: \"007\"}\n      - {key: 'é', limit: 0}\n")
	f.Add("")
	f.Add("# nothing\n")
	f.Add("resources:\n  - &a {name: a, kind: bytes, ledger: 2, window: 2s, default_limit: 1}\n  - *a\n")
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := parseApplyFile("l.yaml", strings.NewReader(s))
		if err != nil {
			cmdtest.CheckNamesLine(t, "l.yaml", yamlpos.Lines([]byte(s)), err, "l.yaml: empty file: want a resources: list")
			return
		}
		names, ledgers := map[string]bool{}, map[uint32]bool{}
		for _, r := range rs {
			if err := r.Validate(); err != nil || names[r.Name] || ledgers[r.Ledger] {
				t.Fatalf("parseApplyFile(%q) accepted %v (%v), or its name or ledger twice", s, r.Resource, err)
			}
			names[r.Name], ledgers[r.Ledger] = true, true
			keys := map[string]bool{}
			for _, u := range r.users {
				if k, err := ledger.NormalizeKey(u.key); err != nil || k != u.key || keys[u.key] || (u.limit != nil && *u.limit > cmdutil.MaxAmount) {
					t.Fatalf("parseApplyFile(%q) accepted user %+v of %s", s, u, r.Name)
				}
				keys[u.key] = true
			}
		}
		written := applyYAML(t, rs)
		again, err := parseApplyFile("m.yaml", strings.NewReader(written))
		if err != nil || !sameResources(rs, again) {
			t.Fatalf("parseApplyFile(%q) = %v;\nwritten back as\n%s\nand read again: %v, %v", s, describe(rs), written, describe(again), err)
		}
	})
}

func sameResources(a, b []fileResource) bool {
	return slices.EqualFunc(a, b, func(x, y fileResource) bool {
		return x.Resource == y.Resource && slices.EqualFunc(x.users, y.users, func(u, v fileUser) bool {
			return u.key == v.key && (u.limit == nil) == (v.limit == nil) && (u.limit == nil || *u.limit == *v.limit)
		})
	})
}

func describe(rs []fileResource) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%v users", r.Resource)
		for _, u := range r.users {
			fmt.Fprintf(&b, " %q", u.key)
			if u.limit != nil {
				fmt.Fprintf(&b, "=%d", *u.limit)
			}
		}
		b.WriteString("; ")
	}
	return b.String()
}
