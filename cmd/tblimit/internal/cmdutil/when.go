package cmdutil

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tblimit/tblimit/ledger"
)

// SpanFlags are --since and --until.
type SpanFlags struct{ since, until string }

// Bind adds --since and --until to cmd; what names what they select in their help.
func (s *SpanFlags) Bind(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&s.since, "since", "", what+" taken at or after this time, or this long ago (2026-01-02T15:04:05Z, 2026-01-02, 90m, 1d12h)")
	cmd.Flags().StringVar(&s.until, "until", "", what+" taken at or before this time, or this long ago")
}

// Parse reads --since and --until: nil for a flag not given.
func (s *SpanFlags) Parse() (since, until *When, err error) {
	if since, err = parseWhenFlag("--since", s.since); err != nil {
		return nil, nil, err
	}
	if until, err = parseWhenFlag("--until", s.until); err != nil {
		return nil, nil, err
	}
	// Compared at a common instant: ago-durations move with it alike.
	if now := time.Now(); since != nil && until != nil && since.Time(now).After(until.Time(now)) {
		return nil, nil, Usagef("--since %s is after --until %s: nothing could be listed", s.since, s.until)
	}
	return since, until, nil
}

func parseWhenFlag(name, s string) (*When, error) {
	if s == "" {
		return nil, nil
	}
	w, err := parseWhen(s)
	if err != nil {
		return nil, Usagef("%s %w", name, err)
	}
	return &w, nil
}

// When is a point in time on the command line: a time, or how long before
// now (resolved when the command runs).
type When struct {
	At  time.Time // zero: Ago before now
	Ago time.Duration
}

// Times the ledger can name: cluster timestamps are nanoseconds since the
// Unix epoch in 63 bits.
var (
	minWhen = time.Unix(0, 1)
	maxWhen = time.Unix(0, 1<<63-1)
)

// parseWhen parses a time (RFC 3339, or a date: midnight UTC) or a
// duration back from now, which may start with days ("1d12h").
func parseWhen(s string) (When, error) {
	t := strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		at, err := time.Parse(layout, t)
		if err != nil {
			continue
		}
		if at.Before(minWhen) || at.After(maxWhen) {
			return When{}, fmt.Errorf("%q: outside the times a cluster records (%s to %s)", s, RFC3339(minWhen), RFC3339(maxWhen))
		}
		return When{At: at}, nil
	}
	d, err := parseDays(t)
	switch {
	case errors.Is(err, errTooLong) || d > ledger.MaxWindow:
		return When{}, fmt.Errorf("%q: longer ago than %s (give a time instead)", s, FormatWindow(ledger.MaxWindow))
	case err != nil || d < 0:
		return When{}, fmt.Errorf("%q: want a time (2026-01-02T15:04:05Z, 2026-01-02) or how long ago (90m, 2d, 1d12h)", s)
	}
	return When{Ago: d}, nil
}

// formatWhen prints w as parseWhen reads it.
func formatWhen(w When) string {
	if !w.At.IsZero() {
		return RFC3339(w.At)
	}
	return FormatWindow(w.Ago)
}

// Time resolves w at now: the zero time (no bound) for nil, and a time the
// cluster can name otherwise.
func (w *When) Time(now time.Time) time.Time {
	switch {
	case w == nil:
		return time.Time{}
	case !w.At.IsZero():
		return w.At
	}
	t := now.Add(-w.Ago)
	if t.Before(minWhen) || w.Ago < 0 {
		return minWhen
	}
	return t
}
