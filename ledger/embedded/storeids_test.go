//go:build unix

package embedded

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/internal/u128"
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

// TestStoreKnowsNewIDs: a File's store tells a new time-based ID without
// a read, and still finds every ID it holds, whatever its time (now, an
// hour ahead of the clock, beyond its horizon, none), from its memory of
// them and, once opened again, from what it reads on open.
func TestStoreKnowsNewIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data")
	clock := NewManualClock(time.Unix(1_700_000_000, 0))
	open := func() *File {
		f, err := Open(path, WithClock(clock), WithCheckpointBytes(1)) // every request checkpointed: its IDs in the store
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := open()
	if res, err := f.CreateAccounts([]tb.Account{
		{ID: tb.ToUint128(1), Ledger: 7, Code: 1},
		{ID: tb.ToUint128(2), Ledger: 7, Code: 1},
		{ID: tb.ToUint128(3), Ledger: 7, Code: 1, Flags: tb.AccountFlags{DebitsMustNotExceedCredits: true}.ToUint16()},
	}); err != nil || len(res) != 3 || res[2].Status != tb.AccountCreated {
		t.Fatalf("CreateAccounts = %v, %v", res, err)
	}
	now := uint64(time.Now().UnixMilli())
	timed := func(ms uint64, lo uint64) tb.Uint128 { return u128.FromParts(lo, ms<<16|0x1234) }
	ids := map[string]tb.Uint128{
		"time-based, now":       timed(now, 1),
		"an hour ahead":         timed(now+uint64(time.Hour.Milliseconds()), 2),
		"beyond the horizon":    u128.FromParts(3, ^uint64(0)),
		"of no time":            tb.ToUint128(100),
		"failed, time-based":    timed(now, 4),
		"failed, an hour ahead": timed(now+uint64(time.Hour.Milliseconds()), 5),
	}
	transfer := func(name string) tb.Transfer {
		x := tb.Transfer{ID: ids[name], DebitAccountID: tb.ToUint128(1), CreditAccountID: tb.ToUint128(2), Amount: tb.ToUint128(1), Ledger: 7, Code: 1}
		if strings.HasPrefix(name, "failed") {
			x.DebitAccountID = tb.ToUint128(3) // no credits: exceeds_credits, which an ID fails for good with
		}
		return x
	}
	want := func(name string, again bool) tb.CreateTransferStatus {
		switch {
		case strings.HasPrefix(name, "failed") && again:
			return tb.TransferIDAlreadyFailed
		case strings.HasPrefix(name, "failed"):
			return tb.TransferExceedsCredits
		case again:
			return tb.TransferExists
		}
		return tb.TransferCreated
	}
	create := func(f *File, name string, again bool) {
		t.Helper()
		res, err := f.CreateTransfers([]tb.Transfer{transfer(name)})
		if err != nil || len(res) != 1 || res[0].Status != want(name, again) {
			t.Fatalf("CreateTransfers(%s) = %v, %v; want %v", name, res, err, want(name, again))
		}
	}
	for name := range ids {
		create(f, name, false)
	}
	check := func(f *File, when string) {
		t.Helper()
		for name, id := range ids {
			if !f.st.known.mayHold(id) {
				t.Errorf("%s: the store says it does not hold the ID %s", when, name)
			}
			create(f, name, true)
		}
		if next := timed(uint64(time.Now().UnixMilli()), 99); f.st.known.mayHold(next) {
			t.Errorf("%s: a new time-based ID is read from the store", when)
		}
		if hashed := u128.FromParts(99, ^uint64(0)-1); f.st.known.mayHold(hashed) {
			t.Errorf("%s: a new ID beyond the horizon is read from the store", when)
		}
	}
	check(f, "after the checkpoints")
	f.Close()
	f = open()
	defer f.Close()
	<-f.st.known.done // the IDs beyond the horizon read
	check(f, "opened again")
}

// TestStoredIDsSettle: an ID stored ahead of the clock is known until the
// clock passes it, and then still known, from below, where it moved.
func TestStoredIDsSettle(t *testing.T) {
	k := storedIDs{ahead: map[tb.Uint128]struct{}{}, soonest: ^uint64(0), horizon: 10_000}
	k.opened.Store(new(idFilter)) // none stored before
	at := func(ms, lo uint64) tb.Uint128 { return u128.FromParts(lo, ms<<16) }
	k.add(at(100, 1), 150)
	k.add(at(200, 1), 150) // ahead
	k.add(at(20_000, 1), 150)
	for _, c := range []struct {
		id   tb.Uint128
		want bool
	}{{at(100, 1), true}, {at(50, 1), true}, {at(120, 1), false}, {at(200, 1), true}, {at(200, 2), false}, {at(20_000, 1), true}, {at(20_000, 2), false}} {
		if got := k.mayHold(c.id); got != c.want {
			t.Errorf("before settling: mayHold(%v) = %v, want %v", c.id, got, c.want)
		}
	}
	k.settle(150) // nothing passed
	if len(k.ahead) != 1 {
		t.Fatalf("settle(150) left %d IDs ahead, want 1", len(k.ahead))
	}
	k.settle(250)
	if len(k.ahead) != 0 || k.below != at(200, 1) || k.soonest != ^uint64(0) {
		t.Fatalf("settle(250): %d IDs ahead, below %v, want none and %v", len(k.ahead), k.below, at(200, 1))
	}
	if !k.mayHold(at(200, 1)) || k.mayHold(at(210, 0)) {
		t.Error("after settling: the ID settled is not known, or a new one is")
	}
}

// TestIDFilter: a filter holds every ID added to it, through several
// filters of its run, and says it holds few it was not given.
func TestIDFilter(t *testing.T) {
	var f idFilter
	rng := rand.New(rand.NewPCG(1, 2))
	id := func() tb.Uint128 { return u128.FromParts(rng.Uint64(), rng.Uint64()) }
	const n = 5 * bloomFirstRoom
	added := make([]tb.Uint128, n)
	for i := range added {
		added[i] = id()
		f.add(added[i])
	}
	if len(f.runs) != 3 { // rooms 1, 2 and 4 times the first
		t.Fatalf("%d IDs made %d filters, want 3", n, len(f.runs))
	}
	for _, a := range added {
		if !f.mayHold(a) {
			t.Fatalf("the filter lost %v", a)
		}
	}
	said := 0
	const tries = 100_000
	for range tries {
		if f.mayHold(id()) {
			said++
		}
	}
	if rate := float64(said) / tries; rate > 0.03 {
		t.Errorf("the filter says it holds %.2f%% of IDs it was not given, want at most 3%%", 100*rate)
	}
}

// TestStoredIDsLoadFar: the IDs beyond the horizon a store holds are read
// on open apart from the rest; a store closed while it reads them, or
// before, still says it may hold each, and once read it tells new ones.
func TestStoredIDsLoadFar(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: silent{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	far := func() tb.Uint128 { return u128.FromParts(rng.Uint64(), rng.Uint64()|1<<63) }
	held := make([]tb.Uint128, 20_000)
	b := db.NewBatch()
	for i := range held {
		held[i] = far()
		b.Set(idKey(keyID, held[i]), []byte{0, 0, 0, 1}, nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	mayHoldAll := func(k *storedIDs, when string) {
		t.Helper()
		for _, id := range held {
			if !k.mayHold(id) {
				t.Fatalf("%s: the store says it does not hold %v", when, id)
			}
		}
	}
	for range 3 { // closed at once: before, while or after the IDs are read
		var k storedIDs
		if err := k.load(db, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := k.readFar(db); err != nil {
			t.Fatal(err)
		}
		k.close()
		mayHoldAll(&k, "closed at once")
	}
	var k storedIDs
	if err := k.load(db, time.Now()); err != nil {
		t.Fatal(err)
	}
	if k.opened.Load() != nil {
		t.Fatal("load read the IDs beyond the horizon")
	}
	mayHoldAll(&k, "loaded, the IDs beyond the horizon not read yet")
	if err := k.readFar(db); err != nil {
		t.Fatal(err)
	}
	defer k.close()
	<-k.done
	if k.opened.Load() == nil {
		t.Fatal("the IDs beyond the horizon were not read")
	}
	mayHoldAll(&k, "read")
	said := 0
	for range 10_000 {
		if k.mayHold(far()) {
			said++
		}
	}
	if said > 200 {
		t.Errorf("the store says it may hold %d of 10,000 new IDs beyond the horizon, want at most 200", said)
	}
	id := far()
	k.add(id, idTimeAt(time.Now()))
	if !k.mayHold(id) {
		t.Error("an ID beyond the horizon stored after open is not known")
	}
}
