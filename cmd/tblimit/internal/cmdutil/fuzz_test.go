package cmdutil

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// The fuzz targets of the command line's parsers and readers. Each checks,
// besides not panicking, that what is accepted round-trips or follows the
// documented rule, and that what is refused says where: the input quoted,
// or file:line. Their seed corpora are in testdata/fuzz; `go test` runs them
// as tests, `go test -fuzz=FuzzX -run=^$` explores.

func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"2s", "1d", "1h30m", "0", "60", "1.5s", "99999999999d", "-3d", "1d12h", "49710d6h28m15s", "49710d6h28m16s", "1d-1h", " 7d "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseWindow(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("parseWindow(%q): error %q does not quote the input", s, err)
			}
			return
		}
		// The rule: whole seconds from one second to the largest timeout.
		if d < time.Second || d%time.Second != 0 || d > ledger.MaxWindow {
			t.Fatalf("parseWindow(%q) = %v, outside the rule", s, d)
		}
		if back, err := ParseWindow(FormatWindow(d)); err != nil || back != d {
			t.Fatalf("parseWindow(formatWindow(%v)) = %v, %v", d, back, err)
		}
	})
}

// countRule is the documented rule for amounts and limits, computed
// independently: a whole number, '_' separators allowed, white space
// around, at most 2^63-1.
func countRule(s string) (uint64, bool) {
	if !countSyntax.MatchString(s) {
		return 0, false
	}
	t := strings.ReplaceAll(s, "_", "")
	n, ok := new(big.Int).SetString(t, 10)
	if !ok || n.Cmp(big.NewInt(MaxAmount)) > 0 {
		return 0, false
	}
	return n.Uint64(), true
}

// countSyntax is digits, with single underscores between them.
var countSyntax = regexp.MustCompile(`^[0-9]+(_[0-9]+)*$`)

func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "1_000", "1__000", "_1000", "1000_", "18446744073709551616", "9223372036854775807", "9223372036854775808", " 7 ", "0x10", "1e3", "+5", "_", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, ok := countRule(s)
		n, err := ParseAmount(s)
		if (err == nil) != (ok && want > 0) || (err == nil && n != want) {
			t.Fatalf("parseAmount(%q) = %d, %v; the rule says %d, %v (and at least 1)", s, n, err, want, ok)
		}
		l, err2 := ParseLimit(s)
		if (err2 == nil) != ok || (err2 == nil && l != want) {
			t.Fatalf("parseLimit(%q) = %d, %v; the rule says %d, %v", s, l, err2, want, ok)
		}
		for _, e := range []error{err, err2} {
			if e != nil && !strings.Contains(e.Error(), strconv.Quote(s)) {
				t.Fatalf("error %q does not quote the input %q", e, s)
			}
		}
		if ok {
			if back, err := ParseLimit(strconv.FormatUint(want, 10)); err != nil || back != want {
				t.Fatalf("parseLimit(%d) = %d, %v", want, back, err)
			}
		}
	})
}

func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"90m", "2d", "1d12h", "0s", "2026-01-02", "2026-01-02T15:04:05Z", "2026-01-02T15:04:05.123+02:00", "1969-12-31", "-1h", "50000d", "49710d49710h"} {
		f.Add(s)
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, s string) {
		w, err := parseWhen(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("parseWhen(%q): error %q does not quote the input", s, err)
			}
			return
		}
		back, err := parseWhen(formatWhen(w))
		if err != nil || !back.At.Equal(w.At) || back.Ago != w.Ago {
			t.Fatalf("parseWhen(formatWhen(%+v)) = %+v, %v", w, back, err)
		}
		if at := w.Time(now); at.Before(minWhen) || at.After(maxWhen) {
			t.Fatalf("parseWhen(%q) resolves to %v, a time no cluster records", s, at)
		}
	})
}
