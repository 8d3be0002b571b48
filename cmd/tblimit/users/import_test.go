package users

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdtest"
	"github.com/tblimit/tblimit/cmd/tblimit/internal/cmdutil"
	"github.com/tblimit/tblimit/ledger"
)

// The fuzz targets of the command line's parsers and readers. Each checks,
// besides not panicking, that what is accepted round-trips or follows the
// documented rule, and that what is refused says where: the input quoted,
// or file:line. Their seed corpora are in testdata/fuzz; `go test` runs them
// as tests, `go test -fuzz=FuzzX -run=^$` explores.

// Only a first line key,limit (or key alone) is a header: a first user
// named key or user, with a limit, is imported, not skipped. (Found by
// FuzzParseUsersCSV's round trip: such a user was dropped without a word.)
func TestImportHeaderRule(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"key,limit\nalice,1\n", []string{"alice"}},
		{"KEY , Limit\nalice,1\n", []string{"alice"}},
		{"key\nalice\n", []string{"alice"}},
		{"user,limit\nalice,1\n", []string{"alice"}},
		{"user,5\nbob,3\n", []string{"user", "bob"}},
		{"key,7\n", []string{"key"}},
		{"key,\nbob\n", []string{"key", "bob"}},
		{"key,limit\nuser,5\n", []string{"user"}},
	} {
		users, err := parseUsersCSV("f.csv", strings.NewReader(c.in))
		var got []string
		for _, u := range users {
			got = append(got, u.key)
		}
		if err != nil || strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("parseUsersCSV(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// usersCSV writes users as an import file, every field quoted.
func usersCSV(users []csvUser) string {
	var b strings.Builder
	q := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	for _, u := range users {
		limit := ""
		if u.limit != nil {
			limit = strconv.FormatUint(*u.limit, 10)
		}
		b.WriteString(q(u.key) + "," + q(limit) + "\n")
	}
	return b.String()
}

func FuzzParseUsersCSV(f *testing.F) {
	for _, s := range []string{"key,limit\nalice,1\nbob,\n", "\ufeffkey,limit\r\nalice,1\r\n", " alice,1\n", "a\nb\n", "a,1,2\n", "\"a,1\n", "a,1\na,2\n", "# c\nx,-1\n", "", "user,5\nbob,3\n", "key,limit\nuser,5\n", "Key\nkey\n", "\"#x\",1\n", "e\u0301,1\n\u00e9,2\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		users, err := parseUsersCSV("f.csv", strings.NewReader(s))
		if err != nil {
			cmdtest.CheckNamesLine(t, "f.csv", strings.Count(s, "\n"), err, "f.csv: no users") // encoding/csv ends lines at \n only
			return
		}
		seen := map[string]bool{}
		for _, u := range users {
			if k, err := ledger.NormalizeKey(u.key); err != nil || k != u.key || seen[u.key] || u.line < 1 || (u.limit != nil && *u.limit > cmdutil.MaxAmount) {
				t.Fatalf("parseUsersCSV(%q) accepted %+v", s, u)
			}
			seen[u.key] = true
		}
		again, err := parseUsersCSV("g.csv", strings.NewReader(usersCSV(users)))
		if err != nil || !sameUsers(users, again) {
			t.Fatalf("parseUsersCSV(%q) = %v; written back and read again: %v, %v", s, users, again, err)
		}
	})
}

func sameUsers(a, b []csvUser) bool {
	return slices.EqualFunc(a, b, func(x, y csvUser) bool {
		return x.key == y.key && (x.limit == nil) == (y.limit == nil) && (x.limit == nil || *x.limit == *y.limit)
	})
}
