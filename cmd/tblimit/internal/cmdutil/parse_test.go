package cmdutil

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
		{"1d12h", 36 * time.Hour, ""},
		{"2d30m", 48*time.Hour + 30*time.Minute, ""},
		{"1d1s", 24*time.Hour + time.Second, ""},
		{"0d5s", 5 * time.Second, ""},
		{"49710d6h28m15s", ledger.MaxWindow, ""},
		{"49710d6h28m16s", 0, "longer than the largest window (49710d6h28m15s)"},
		{"50000d", 0, "longer than the largest window (49710d6h28m15s)"},
		{"99999999999999999999d", 0, "longer than the largest window (49710d6h28m15s)"},
		{"1d2562047h", 0, "longer than the largest window"},
		{"2000000h", 0, "longer than the largest window (49710d6h28m15s)"},
		{"1d-1h", 0, "want a duration"},
		{"1.5d", 0, "want a duration"},
		{"d12h", 0, "want a duration"},
		{"1dd", 0, "want a duration"},
		{"1h1d", 0, "want a duration"},
		{"1d12h0.5s", 0, "not a whole number of seconds"},
	} {
		got, err := ParseWindow(c.in)
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
		a, err := ParseAmount(c.in)
		if (err == nil) != (c.amount != 0) || a != c.amount {
			t.Errorf("parseAmount(%q) = %d, %v, want %d", c.in, a, err, c.amount)
		}
		if _, err := ParseLimit(c.in); (err == nil) != c.limit {
			t.Errorf("parseLimit(%q) error = %v, want ok=%v", c.in, err, c.limit)
		}
	}
}

func TestDisplayKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"alice", "alice"},
		{"a b", "a b"},
		{"\u00e9", "\u00e9"},
		{"a\tb", `"a\tb"`},
		{"a\nb", `"a\nb"`},
		{"\xff", `"\xff"`},
		{" a", `" a"`},
		{"e\u0301", "\"e\u0301\""}, // NFD: not as the ledger keeps keys
		{`"q"`, `"\"q\""`},
	} {
		if got := DisplayKey(c.in); got != c.want {
			t.Errorf("displayKey(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}
