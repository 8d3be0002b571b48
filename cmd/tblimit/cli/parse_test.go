package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

func TestParseWindow(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"2s", 2 * time.Second, ""},
		{"1m", time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"1d", 24 * time.Hour, ""},
		{" 7d ", 7 * 24 * time.Hour, ""},
		{"0", 0, "shorter than one second"},
		{"0s", 0, "shorter than one second"},
		{"500ms", 0, "shorter than one second"},
		{"1.5s", 0, "not a whole number of seconds"},
		{"60", 0, "give a unit"},
		{"-1s", 0, "shorter than one second"},
		{"1y", 0, "want a duration"},
		{"d", 0, "want a duration"},
		{"50000d", 0, "want a duration"},
		{"2000000h", 0, "longer than"},
	} {
		got, err := parseWindow(c.in)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("parseWindow(%q) = %v, %v, want %v", c.in, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("parseWindow(%q) = %v, %v, want an error containing %q", c.in, got, err, c.err)
		}
	}
}

func TestParseCount(t *testing.T) {
	for _, c := range []struct {
		in     string
		amount uint64 // 0: an error from parseAmount
		limit  bool   // parseLimit accepts it
	}{
		{"1", 1, true},
		{"10_000", 10000, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"0", 0, true},
		{"9223372036854775808", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"1e3", 0, false},
		{"+5", 0, false},
		{"", 0, false},
		{"0x10", 0, false},
	} {
		a, err := parseAmount(c.in)
		if (err == nil) != (c.amount != 0) || a != c.amount {
			t.Errorf("parseAmount(%q) = %d, %v, want %d", c.in, a, err, c.amount)
		}
		if _, err := parseLimit(c.in); (err == nil) != c.limit {
			t.Errorf("parseLimit(%q) error = %v, want ok=%v", c.in, err, c.limit)
		}
	}
}

func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"2s", "1d", "1h30m", "0", "60", "1.5s", "99999999999d", "-3d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseWindow(s)
		if err != nil {
			return
		}
		if _, err := ledger.WindowSeconds(d); err != nil {
			t.Fatalf("parseWindow(%q) = %v, which the ledger refuses: %v", s, d, err)
		}
		if back, err := parseWindow(formatWindow(d)); err != nil || back != d {
			t.Fatalf("parseWindow(formatWindow(%v)) = %v, %v", d, back, err)
		}
	})
}

func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "1_000", "18446744073709551616", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseAmount(s)
		if err == nil && (n == 0 || n > maxAmount) {
			t.Fatalf("parseAmount(%q) = %d", s, n)
		}
		if err != nil && !strings.Contains(err.Error(), "\"") {
			t.Fatalf("parseAmount(%q): error %q does not quote the input", s, err)
		}
	})
}

func FuzzParseUsersCSV(f *testing.F) {
	for _, s := range []string{"key,limit\nalice,1\nbob,\n", "\ufeffkey,limit\r\nalice,1\r\n", " alice,1\n", "a\nb\n", "a,1,2\n", "\"a,1\n", "a,1\na,2\n", "# c\nx,-1\n", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		users, err := parseUsersCSV("f.csv", strings.NewReader(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.csv") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, u := range users {
			if k, err := ledger.NormalizeKey(u.key); err != nil || k != u.key || seen[u.key] || u.line < 1 || (u.limit != nil && *u.limit > maxAmount) {
				t.Fatalf("parseUsersCSV(%q) accepted %+v", s, u)
			}
			seen[u.key] = true
		}
	})
}

func FuzzParseApplyFile(f *testing.F) {
	f.Add("resources:\n  - {name: api, kind: requests, ledger: 1, window: 1m, default_limit: 5, users: [{key: a, limit: 3}]}\n")
	f.Add("resources:\n  - name: usd\n    kind: money\n    ledger: 3\n    currency: 840\n    window: 1d\n    default_limit: 100\n")
	f.Add("resources: []\n")
	f.Add("- a\n")
	f.Add("resources:\n  - name: x\n   kind: y\n")
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := parseApplyFile("l.yaml", strings.NewReader(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "l.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, r := range rs {
			if err := r.Validate(); err != nil {
				t.Fatalf("parseApplyFile accepted an invalid resource %v: %v", r.Resource, err)
			}
		}
	})
}
