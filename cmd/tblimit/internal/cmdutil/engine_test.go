package cmdutil

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/ledger/embedded"
)

func TestEngineGuard(t *testing.T) {
	f, err := embedded.Open(filepath.Join(t.TempDir(), "j"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var warned []string
	g := newEngineGuard(f, 1000, func(s string) { warned = append(warned, s) })
	var live uint64
	g.live = func() uint64 { return live }
	c := ledger.New(f)
	r := ledger.Resource{Name: "r", Ledger: 1, Kind: ledger.KindRequests, Window: time.Minute, DefaultLimit: 100, Lazy: true}
	decide := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.Acquire(ctx, r, ledger.Request{User: "alice", Amount: 1})
		return err
	}
	if err := c.CreateResource(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		live    uint64
		warning string // "" for none
		refused bool
	}{
		{100, "", false},
		{500, "50% of its bound", false},
		{600, "", false},
		{750, "75% of its bound", false},
		{700, "", false},
		{950, "90% of its bound", false},
		{1000, "refusing new decisions", true},
		{920, "", true},
		{2000, "", true},
		{890, "taking new decisions", false},
		{960, "90% of its bound", false},
		{1200, "refusing new decisions", true},
	}
	for i, s := range steps {
		warned, live = nil, s.live
		g.check()
		if got := strings.Join(warned, "\n"); s.warning == "" && got != "" || !strings.Contains(got, s.warning) || len(warned) > 1 {
			t.Errorf("step %d (live %d): warned %q, want %q", i, s.live, got, s.warning)
		}
		err := decide()
		if refused := errors.Is(err, embedded.ErrRefused); refused != s.refused || refused && !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("step %d (live %d): a decision = %v; want refused %v, as unavailable", i, s.live, err, s.refused)
		}
	}
	if !strings.Contains(strings.Join(warned, ""), "tblimit tigerbeetle up") {
		t.Errorf("the refusal says %q: want what to do", warned)
	}
}

func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		err  string
	}{
		{"0", 0, ""},
		{"4096", 4096, ""},
		{"512MiB", 512 << 20, ""},
		{"8 GiB", 8 << 30, ""},
		{"2GB", 2e9, ""},
		{"64KiB", 64 << 10, ""},
		{"", 0, "want a size"},
		{"GiB", 0, "want a size"},
		{"-1GiB", 0, "want a size"},
		{"1.5GiB", 0, "want a size"},
		{"8gb", 0, "unknown unit"},
		{"99999999999999999999", 0, "too large"},
		{"9000000000TiB", 0, "too large"},
	} {
		got, err := ParseBytes(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseBytes(%q) = %d, %v; want error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}
