package cmdutil

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// MaxAmount is the largest amount or limit the command line takes.
const MaxAmount = math.MaxInt64

// ParseAmount parses an amount of units: a whole number from 1 to MaxAmount.
func ParseAmount(s string) (uint64, error) {
	n, err := parseCount(s)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("%q: must be at least 1", s)
	}
	return n, nil
}

// ParseLimit parses a limit: a whole number from 0 to MaxAmount.
func ParseLimit(s string) (uint64, error) { return parseCount(s) }

func parseCount(s string) (uint64, error) {
	switch {
	case s == "":
		return 0, fmt.Errorf("%q: want a whole number", s)
	case strings.TrimSpace(s) != s:
		return 0, fmt.Errorf("%q: white space around the number", s)
	case strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__"):
		return 0, fmt.Errorf("%q: a _ goes between digits, one at a time (10_000)", s)
	}
	t := strings.ReplaceAll(s, "_", "")
	if t[0] == '-' {
		return 0, fmt.Errorf("%q: must not be negative", s)
	}
	for _, c := range t {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q: want a whole number (digits only)", s)
		}
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n > MaxAmount {
		return 0, fmt.Errorf("%q: too large (at most %d)", s, uint64(MaxAmount))
	}
	return n, nil
}

// ParseLedger parses a TigerBeetle ledger number: 1 to 2^32-1.
func ParseLedger(s string) (uint32, error) {
	t := strings.TrimSpace(s)
	n, err := strconv.ParseUint(t, 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q: want a ledger number from 1 to %d", s, uint32(math.MaxUint32))
	}
	return uint32(n), nil
}

// ParseWindow parses a window: a Go duration ("2s", "1m", "1h30m"), a
// number of days ("1d"), or days and a Go duration ("1d12h"); a whole number
// of seconds from 1s to ledger.MaxWindow.
func ParseWindow(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	d, err := parseDays(t)
	switch {
	case errors.Is(err, errTooLong):
		return 0, fmt.Errorf("%q: %w", s, err)
	case err != nil:
		if _, nerr := strconv.ParseUint(t, 10, 64); nerr == nil {
			return 0, fmt.Errorf("%q: give a unit, e.g. %ss", s, t)
		}
		return 0, fmt.Errorf("%q: want a duration such as 2s, 1m, 24h, 1d or 1d12h", s)
	case d < time.Second:
		return 0, fmt.Errorf("%q: shorter than one second", s)
	case d%time.Second != 0:
		return 0, fmt.Errorf("%q: not a whole number of seconds", s)
	case d > ledger.MaxWindow:
		return 0, fmt.Errorf("%q: %w", s, errTooLong)
	}
	if _, err := ledger.WindowSeconds(d); err != nil { // the ledger's rule has the last word
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return d, nil
}

// errTooLong is a window longer than the largest TigerBeetle allows.
var errTooLong = fmt.Errorf("longer than the largest window (%s)", FormatWindow(ledger.MaxWindow))

const day = 24 * time.Hour

// parseDays parses a Go duration that may start with a number of days:
// "1d", "1d12h", "2h".
func parseDays(t string) (time.Duration, error) {
	days, rest, ok := strings.Cut(t, "d") // no Go duration unit has a d
	if !ok {
		return time.ParseDuration(t)
	}
	if days == "" || strings.Trim(days, "0123456789") != "" || strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
		return 0, fmt.Errorf("bad days %q", t)
	}
	n, err := strconv.ParseUint(days, 10, 64)
	if err != nil || n > uint64(ledger.MaxWindow/day) {
		return 0, errTooLong
	}
	d := time.Duration(n) * day
	if rest == "" {
		return d, nil
	}
	r, err := time.ParseDuration(rest)
	if err != nil {
		return 0, err
	}
	if r > ledger.MaxWindow {
		return 0, errTooLong
	}
	return d + r, nil
}

// FormatWindow prints a window as ParseWindow reads it ("2s", "1m",
// "1d12h"): the same form everywhere.
func FormatWindow(d time.Duration) string { return ledger.FormatWindow(d) }

// KeyArg applies the key rule (ledger.NormalizeKey) to the user key
// argument name (USER, KEY...), and returns the key as the ledger uses it.
func KeyArg(name, key string) (string, error) {
	k, err := ledger.NormalizeKey(key)
	if err != nil {
		return "", Usagef("%s: %w", name, err)
	}
	return k, nil
}

// DisplayKey prints a key stored in the ledger for a table: as it is when it
// follows the key rule, quoted otherwise (a key written before the rule may
// hold a tab or a newline, which would break the columns), and quoted when
// it starts with a quote, so that the two cannot be confused.
func DisplayKey(key string) string {
	if k, err := ledger.NormalizeKey(key); err != nil || k != key || strings.HasPrefix(key, `"`) {
		return strconv.Quote(key)
	}
	return key
}
