package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// maxAmount is the largest amount or limit the command line takes.
const maxAmount = math.MaxInt64

// parseAmount parses an amount of units: a whole number from 1 to maxAmount.
func parseAmount(s string) (uint64, error) {
	n, err := parseCount(s)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("%q: must be at least 1", s)
	}
	return n, nil
}

// parseLimit parses a limit: a whole number from 0 to maxAmount.
func parseLimit(s string) (uint64, error) { return parseCount(s) }

func parseCount(s string) (uint64, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	if t == "" {
		return 0, fmt.Errorf("%q: want a whole number", s)
	}
	if t[0] == '-' {
		return 0, fmt.Errorf("%q: must not be negative", s)
	}
	for _, c := range t {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q: want a whole number (digits only)", s)
		}
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n > maxAmount {
		return 0, fmt.Errorf("%q: too large (at most %d)", s, uint64(maxAmount))
	}
	return n, nil
}

// parseLedger parses a TigerBeetle ledger number: 1 to 2^32-1.
func parseLedger(s string) (uint32, error) {
	t := strings.TrimSpace(s)
	n, err := strconv.ParseUint(t, 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q: want a ledger number from 1 to %d", s, uint32(math.MaxUint32))
	}
	return uint32(n), nil
}

// parseWindow parses a window: a Go duration ("2s", "1m", "1h30m") or a
// number of days ("1d"), a whole number of seconds from 1s to
// ledger.MaxWindow.
func parseWindow(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	var d time.Duration
	if days, ok := strings.CutSuffix(t, "d"); ok && days != "" && !strings.ContainsAny(days, "hmsuµn") {
		n, err := strconv.ParseUint(days, 10, 32)
		if err != nil || n > uint64(ledger.MaxWindow/(24*time.Hour)) {
			return 0, fmt.Errorf("%q: want a duration such as 2s, 1m, 24h or 1d", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(t); err != nil {
			if _, nerr := strconv.ParseUint(t, 10, 64); nerr == nil {
				return 0, fmt.Errorf("%q: give a unit, e.g. %ss", s, t)
			}
			return 0, fmt.Errorf("%q: want a duration such as 2s, 1m, 24h or 1d", s)
		}
	}
	if _, err := ledger.WindowSeconds(d); err != nil {
		return 0, fmt.Errorf("%q: %s", s, strings.TrimPrefix(err.Error(), ledger.ErrInvalidWindow.Error()+": "))
	}
	return d, nil
}

// formatWindow prints a window as parseWindow reads it.
func formatWindow(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// keyArg applies the key rule (ledger.NormalizeKey) to the user key
// argument name (USER, KEY...), and returns the key as the ledger uses it.
func keyArg(name, key string) (string, error) {
	k, err := ledger.NormalizeKey(key)
	if err != nil {
		return "", usagef("%s: %w", name, err)
	}
	return k, nil
}

// displayKey prints a key stored in the ledger for a table: as it is when it
// follows the key rule, quoted otherwise (a key written before the rule may
// hold a tab or a newline, which would break the columns), and quoted when
// it starts with a quote, so that the two cannot be confused.
func displayKey(key string) string {
	if k, err := ledger.NormalizeKey(key); err != nil || k != key || strings.HasPrefix(key, `"`) {
		return strconv.Quote(key)
	}
	return key
}
