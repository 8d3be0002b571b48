//go:build unix

package embedded

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// TestStoreRefusesAnAccountIDTwice opens a store whose block of account
// IDs holds one ID twice: the index built on open must find it, and the
// file is refused as corrupt.
func TestStoreRefusesAnAccountIDTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data")
	clock := NewManualClock(time.Unix(1_700_000_000, 0))
	f, err := Open(path, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	var accounts []tb.Account
	for i := range 3 {
		accounts = append(accounts, tb.Account{ID: tb.ToUint128(uint64(100 + i)), Ledger: 1, Code: 1})
	}
	res, err := f.CreateAccounts(accounts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Status != tb.AccountCreated {
			t.Fatalf("CreateAccounts = %v", res)
		}
	}
	f.Close()

	db, err := pebble.Open(StorePath(path), &pebble.Options{Logger: silent{}})
	if err != nil {
		t.Fatal(err)
	}
	v, closer, err := db.Get(key1(keyAcctIDs, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 3*16 {
		t.Fatalf("the first block of account IDs holds %d bytes, want 48", len(v))
	}
	twice := append(append([]byte(nil), v[:32]...), v[:16]...)
	closer.Close()
	if err := db.Set(key1(keyAcctIDs, 0), twice, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	f, err = Open(path, WithClock(clock))
	if err == nil {
		f.Close()
		t.Fatal("Open of a store with an account ID twice = nil error, want ErrCorrupt")
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "3 account IDs (2 distinct)") {
		t.Fatalf("Open of a store with an account ID twice = %v, want ErrCorrupt naming 3 IDs, 2 distinct", err)
	}
}
