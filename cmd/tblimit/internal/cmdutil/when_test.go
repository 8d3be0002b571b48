package cmdutil

import (
	"strings"
	"testing"
	"time"
)

func TestParseWhen(t *testing.T) {
	for _, c := range []struct {
		in   string
		want When
		err  string
	}{
		{"90m", When{Ago: 90 * time.Minute}, ""},
		{"2d", When{Ago: 48 * time.Hour}, ""},
		{" 1d12h ", When{Ago: 36 * time.Hour}, ""},
		{"0s", When{}, ""},
		{"1.5s", When{Ago: 1500 * time.Millisecond}, ""},
		{"2026-01-02", When{At: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}, ""},
		{"2026-01-02T15:04:05Z", When{At: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}, ""},
		{"2026-01-02T15:04:05.5+02:00", When{At: time.Date(2026, 1, 2, 13, 4, 5, 5e8, time.UTC)}, ""},
		{"1969-12-31", When{}, "outside the times a cluster records"},
		{"2300-01-01", When{}, "outside the times a cluster records"},
		{"-1h", When{}, "want a time"},
		{"60", When{}, "want a time"},
		{"yesterday", When{}, "want a time"},
		{"2026-13-01", When{}, "want a time"},
		{"50000d", When{}, "longer ago than 49710d6h28m15s"},
		{"", When{}, "want a time"},
	} {
		got, err := parseWhen(c.in)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseWhen(%q) = %+v, %v; want an error containing %q", c.in, got, err, c.err)
			}
		case err != nil || !got.At.Equal(c.want.At) || got.Ago != c.want.Ago:
			t.Errorf("parseWhen(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		w    *When
		want time.Time
	}{
		{nil, time.Time{}},
		{&When{Ago: time.Hour}, now.Add(-time.Hour)},
		{&When{At: now.Add(time.Minute)}, now.Add(time.Minute)},
		{&When{Ago: 100 * 365 * 24 * time.Hour}, minWhen},
	} {
		if got := c.w.Time(now); !got.Equal(c.want) {
			t.Errorf("%+v.time(%v) = %v, want %v", c.w, now, got, c.want)
		}
	}
}
