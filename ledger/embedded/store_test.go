//go:build unix

package embedded_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
)

// TestStoreAnswersAsEngineUnderEviction is TestFileAnswersAsEngine with a
// checkpoint every few requests and no cache at all: every transfer,
// expiry and list entry older than the last checkpoint is read back from
// the store when used.
func TestStoreAnswersAsEngineUnderEviction(t *testing.T) {
	ops := 100_000
	if testing.Short() || raceEnabled {
		ops = 10_000
	}
	clock := embedded.NewManualClock(time.Unix(1_700_000_000, 0))
	w := &equivWorkload{
		t:        t,
		rng:      rand.New(rand.NewPCG(3, 5)),
		clock:    clock,
		mem:      embedded.New(embedded.WithClock(clock)),
		path:     filepath.Join(t.TempDir(), "data"),
		statuses: map[tb.CreateTransferStatus]int{},
	}
	t.Cleanup(w.mem.Close)
	var tuned *embedded.File
	tune := func() {
		if w.file != tuned {
			embedded.SetCheckpointBytes(w.file, 4<<10)
			embedded.SetCacheBudget(w.file, 0)
			tuned = w.file
		}
	}
	w.reopen()
	t.Cleanup(func() { w.file.Close() })
	tune()
	w.provision()
	for w.ops < ops {
		w.step()
		tune()
	}
	if w.reopens == 0 || w.statuses[tb.TransferPendingTransferExpired] == 0 {
		t.Fatalf("%d reopens, transfer results %v: the workload does not test what it should", w.reopens, w.statuses)
	}
}

// journalVersion reads the format version in a journal's header, after
// checking the header as a binary from before stores does: it opens the
// file only if the header is exactly version 1's (magic, version,
// CRC32C), and refuses any other version as unsupported.
func journalVersion(t *testing.T, path string) (version uint32, readByOlder bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 24 || string(data[:16]) != "tblimit journal\n" {
		t.Fatalf("%s has no journal header", path)
	}
	if crc := crc32.Checksum(data[:20], crc32.MakeTable(crc32.Castagnoli)); binary.LittleEndian.Uint32(data[20:]) != crc {
		t.Fatalf("%s: the header's checksum fails", path)
	}
	version = binary.LittleEndian.Uint32(data[16:])
	return version, version == 1
}

// copyFile copies a journal as it is now, to put it back later.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStoreFormatVersions checks that a journal cut back beside its store
// says so in its header (version 2), which a binary from before stores
// refuses, while a journal that holds every request keeps version 1; that
// a version 1 journal converts on its first Open and reads as version 2
// after; and that a journal and a store that do not belong together are
// refused, with nothing written.
func TestStoreFormatVersions(t *testing.T) {
	clock0 := time.Unix(1_700_000_000, 0)
	dir := t.TempDir()
	old := filepath.Join(dir, "old")
	clock := embedded.NewManualClock(clock0)
	_, snaps, ids := journalFill(t, old, clock, 4) // as a binary from before stores writes it
	if v, older := journalVersion(t, old); v != 1 || !older {
		t.Fatalf("a journal that holds every request: version %d, want 1", v)
	}
	accounts := []tb.Uint128{tb.ToUint128(1), tb.ToUint128(2)}
	want, end := snaps[len(snaps)-1], clock.Now() // the state, read at this time

	path := filepath.Join(dir, "data")
	copyFile(t, old, path)
	j := journalOpen(t, path, clock)
	if got := journalSnap(t, j, accounts, ids); !reflect.DeepEqual(got, want) {
		t.Fatalf("state after conversion:\n got %+v\nwant %+v", got.Accounts, want.Accounts)
	}
	j.Close()
	if v, older := journalVersion(t, path); v != 2 || older {
		t.Fatalf("a converted journal: version %d (read by a binary from before stores: %v), want 2, refused", v, older)
	}
	if st, _ := os.Stat(path); st.Size() != 24 {
		t.Fatalf("a converted journal is %d bytes, want its header alone", st.Size())
	}
	j = journalOpen(t, path, clock)
	if got := journalSnap(t, j, accounts, ids); !reflect.DeepEqual(got, want) {
		t.Fatalf("state after a second Open:\n got %+v\nwant %+v", got.Accounts, want.Accounts)
	}
	j.Close()

	// A new journal holds every request until its first checkpoint.
	fresh := filepath.Join(dir, "fresh")
	j = journalOpen(t, fresh, clock)
	if v, _ := journalVersion(t, fresh); v != 1 {
		t.Errorf("a new journal: version %d, want 1", v)
	}
	if _, err := j.CreateAccounts([]tb.Account{{ID: tb.ToUint128(9), Ledger: 7, Code: 1}}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if v, _ := journalVersion(t, fresh); v != 2 {
		t.Errorf("a new journal after its first checkpoint: version %d, want 2", v)
	}

	refused := func(t *testing.T, path string, names ...string) {
		t.Helper()
		before, _ := os.ReadFile(path)
		j, err := embedded.Open(path, embedded.WithClock(clock))
		if err == nil {
			j.Close()
			t.Fatalf("Open(%s) = nil error, want ErrCorrupt", path)
		}
		if !errors.Is(err, embedded.ErrCorrupt) {
			t.Errorf("Open(%s) = %v, want ErrCorrupt", path, err)
		}
		for _, name := range names {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("Open(%s) = %v, want it to name %s", path, err, name)
			}
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
			t.Errorf("Open(%s) changed the journal it refused", path)
		}
	}
	store := embedded.StorePath(path)
	t.Run("version 2 without its store", func(t *testing.T) {
		if err := os.Rename(store, store+".away"); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(store+".away", store)
		refused(t, path, path, store)
		if _, err := os.Stat(store); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open made a store for a journal it refused: %v", err)
		}
	})
	t.Run("store without its journal", func(t *testing.T) {
		if err := os.Rename(path, path+".away"); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(path+".away", path)
		refused(t, path, path, store)
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open made a journal beside a store it refused: %v", err)
		}
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		refused(t, path, path, store) // an empty journal
	})
	t.Run("an older copy of the journal put back", func(t *testing.T) {
		again := filepath.Join(dir, "again")
		copyFile(t, old, again)
		j := journalOpen(t, again, clock)
		clock.Advance(time.Second)
		if _, err := j.CreateAccounts([]tb.Account{{ID: tb.ToUint128(10), Ledger: 7, Code: 1}}); err != nil {
			t.Fatal(err)
		}
		j.Close()
		copyFile(t, old, again)
		refused(t, again, again, embedded.StorePath(again))
	})
	t.Run("a conversion cut short", func(t *testing.T) {
		// The store checkpointed every request, the journal's header was
		// never rewritten: the store holds the journal's last request, and
		// Open finishes the conversion.
		again := filepath.Join(dir, "cut-short")
		copyFile(t, old, again)
		journalOpen(t, again, clock).Close()
		copyFile(t, old, again)
		j := journalOpen(t, again, clock)
		clock.Set(end)
		if got := journalSnap(t, j, accounts, ids); !reflect.DeepEqual(got, want) {
			t.Fatalf("state after a conversion cut short:\n got %+v\nwant %+v", got.Accounts, want.Accounts)
		}
		j.Close()
		if v, _ := journalVersion(t, again); v != 2 {
			t.Errorf("version %d after the conversion finished, want 2", v)
		}
	})
}
