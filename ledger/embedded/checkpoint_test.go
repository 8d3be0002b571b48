//go:build unix

package embedded

import (
	"path/filepath"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// TestCheckpointBatchServesAgain: a checkpoint's batch that Pebble copies
// into its memtable serves the next checkpoint; one too large for the
// memtable, whose buffer Pebble keeps as a memtable of its own, is not
// kept; and what every checkpoint wrote reads back after a reopen.
func TestCheckpointBatchServesAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data")
	clock := NewManualClock(time.Unix(1_700_000_000, 0))
	open := func() *File {
		f, err := Open(path, WithClock(clock), WithCheckpointBytes(1)) // every request checkpointed
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := open()
	if res, err := f.CreateAccounts([]tb.Account{{ID: tb.ToUint128(1), Ledger: 7, Code: 1}, {ID: tb.ToUint128(2), Ledger: 7, Code: 1}}); err != nil || res[1].Status != tb.AccountCreated {
		t.Fatalf("CreateAccounts = %v, %v", res, err)
	}
	var ids []tb.Uint128
	send := func(n int) {
		t.Helper()
		for n > 0 {
			batch := make([]tb.Transfer, min(n, 8189))
			for i := range batch {
				ids = append(ids, tb.ToUint128(uint64(1_000+len(ids))))
				batch[i] = tb.Transfer{ID: ids[len(ids)-1], DebitAccountID: tb.ToUint128(1), CreditAccountID: tb.ToUint128(2), Amount: tb.ToUint128(1), Ledger: 7, Code: 1}
			}
			res, err := f.CreateTransfers(batch)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Status != tb.TransferCreated {
					t.Fatalf("CreateTransfers: %v", r)
				}
			}
			n -= len(batch)
		}
	}

	send(10)
	kept := f.st.batch
	if kept == nil {
		t.Fatal("after a checkpoint Pebble applied to its memtable, no batch is kept for the next")
	}
	send(10)
	if f.st.batch != kept {
		t.Fatal("the next checkpoint made a batch of its own")
	}

	SetCheckpointBytes(f, 1<<40)
	send(100_000)
	SetCheckpointBytes(f, 1)
	send(1) // one checkpoint of 100,001 transfers
	if f.st.batchSize < memTableSize/2 {
		t.Fatalf("a checkpoint of 100,001 transfers wrote %d bytes, want at least half a memtable (%d)", f.st.batchSize, memTableSize/2)
	}
	if f.st.batch != nil {
		t.Fatal("a batch Pebble took as a memtable of its own is kept for the next checkpoint")
	}
	send(10)
	if f.st.batch == nil {
		t.Fatal("after a small checkpoint again, no batch is kept")
	}
	if room := cap(f.st.batch.Repr()); room > memTableSize/2 {
		t.Fatalf("the batch kept after a large checkpoint has room for %d bytes, want at most half a memtable (%d)", room, memTableSize/2)
	}
	f.Close()

	f = open()
	defer f.Close()
	found := 0
	for i := 0; i < len(ids); i += 8189 {
		got, err := f.LookupTransfers(ids[i:min(i+8189, len(ids))])
		if err != nil {
			t.Fatal(err)
		}
		found += len(got)
	}
	if found != len(ids) {
		t.Fatalf("opened again: %d of %d transfers found", found, len(ids))
	}
	acc, err := f.LookupAccounts([]tb.Uint128{tb.ToUint128(1)})
	if err != nil || len(acc) != 1 || acc[0].DebitsPosted != tb.ToUint128(uint64(len(ids))) {
		t.Fatalf("opened again: account 1 = %+v, %v; want %d debits posted", acc, err, len(ids))
	}
}
