package ledger_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tblimit/tblimit/ledger"
	"github.com/tblimit/tblimit/testenv"
)

func TestNormalizeKey(t *testing.T) {
	for _, tc := range []struct {
		key, want string
		bad       bool
	}{
		{key: "alice", want: "alice"},
		{key: "user 42", want: "user 42"},
		{key: "caf\u00e9", want: "caf\u00e9"},
		{key: "cafe\u0301", want: "caf\u00e9"}, // NFD: e + combining acute
		{key: "日本", want: "日本"},
		{key: "", bad: true},
		{key: " alice", bad: true},
		{key: "alice\u00a0", bad: true}, // no-break space
		{key: "a\tb", bad: true},
		{key: "a\nb", bad: true},
		{key: "a\u0085b", bad: true}, // NEL, a C1 control
		{key: "\xff\xfe", bad: true},
		{key: strings.Repeat("k", ledger.MaxKeyLen), want: strings.Repeat("k", ledger.MaxKeyLen)},
		{key: strings.Repeat("k", ledger.MaxKeyLen+1), bad: true},
	} {
		got, err := ledger.NormalizeKey(tc.key)
		if tc.bad {
			if !errors.Is(err, ledger.ErrInvalidKey) {
				t.Errorf("NormalizeKey(%q) = %q, %v; want ErrInvalidKey", tc.key, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("NormalizeKey(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
}

func FuzzNormalizeKey(f *testing.F) {
	for _, s := range []string{"alice", "cafe\u0301", " x", "a\tb", "\xff", "Å", "ﬁ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		got, err := ledger.NormalizeKey(key)
		if err != nil {
			if !errors.Is(err, ledger.ErrInvalidKey) {
				t.Fatalf("NormalizeKey(%q) error %v does not wrap ErrInvalidKey", key, err)
			}
			return
		}
		if !utf8.ValidString(got) || got == "" || len(got) > ledger.MaxKeyLen || strings.TrimSpace(got) != got {
			t.Fatalf("NormalizeKey(%q) = %q breaks the rule", key, got)
		}
		again, err := ledger.NormalizeKey(got)
		if err != nil || again != got {
			t.Fatalf("NormalizeKey(%q) = %q, then %q, %v: not idempotent", key, got, again, err)
		}
	})
}

// "é" as one character and as e and an accent is one user, everywhere a
// key is taken.
func TestKeyFormsAreOneUser(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		c, r := setup(t, b, ledger.Resource{Window: time.Hour, DefaultLimit: 2})
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "cafe\u0301", Limit: 2}); err != nil {
			t.Fatal(err)
		}
		if d := acquire(t, c, r, "caf\u00e9", 1); !d.Allowed || d.Remaining != 1 {
			t.Fatalf("Acquire(NFC) of the user provisioned as NFD = %+v", d)
		}
		if u := inspect(t, c, r, "cafe\u0301"); u.InFlight != 1 {
			t.Fatalf("Inspect(NFD) = %+v, want the unit taken as NFC", u)
		}
		if err := c.Provision(ctx, r, ledger.UserLimit{Key: "caf\u00e9", Limit: 2}, ledger.UserLimit{Key: "cafe\u0301", Limit: 2}); !errors.Is(err, ledger.ErrInvalidKey) {
			t.Fatalf("Provision of both forms = %v, want ErrInvalidKey (one key twice)", err)
		}
	})
}

func TestFormatWindow(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", time.Second: "1s", 2 * time.Second: "2s", time.Minute: "1m", 90 * time.Minute: "1h30m",
		24 * time.Hour: "1d", 36 * time.Hour: "1d12h", 7 * 24 * time.Hour: "7d", ledger.MaxWindow: "49710d6h28m15s",
		1500 * time.Millisecond: "1.5s", 24*time.Hour - 7*time.Millisecond: "23h59m59.993s",
	} {
		if got := ledger.FormatWindow(d); got != want {
			t.Errorf("FormatWindow(%v) = %q, want %q", d, got, want)
		}
	}
}
