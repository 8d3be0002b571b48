//go:build unix

package embedded_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
// says so in its header (version 3, which writes over its space), which a
// binary from before stores refuses, while a journal that holds every
// request keeps version 1; that a version 1 journal converts on its first
// Open and reads as version 3 after; that a version 2 journal, which an
// earlier binary left, is read and turns to version 3; and that a journal
// and a store that do not belong together are refused, with nothing
// written.
func TestStoreFormatVersions(t *testing.T) {
	clock0 := time.Unix(1_700_000_000, 0)
	dir := t.TempDir()
	old := filepath.Join(dir, "old")
	clock := embedded.NewManualClock(clock0)
	sizes, snaps, ids := journalFill(t, old, clock, 4) // as a binary from before stores writes it
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
	if v, older := journalVersion(t, path); v != 3 || older {
		t.Fatalf("a converted journal: version %d (read by a binary from before stores: %v), want 3, refused", v, older)
	}
	j = journalOpen(t, path, clock)
	if got := journalSnap(t, j, accounts, ids); !reflect.DeepEqual(got, want) {
		t.Fatalf("state after a second Open:\n got %+v\nwant %+v", got.Accounts, want.Accounts)
	}
	if n, _ := j.Loaded(); j.Size() != 24 || n != 24 {
		t.Fatalf("a converted journal's records end at %d, %d bytes read; want its header alone", j.Size(), n)
	}
	j.Close()

	// A version 2 journal, as an earlier binary leaves it: cut back at a
	// checkpoint (here after the second transfer), then the requests
	// since appended.
	t.Run("version 2", func(t *testing.T) {
		oldData, err := os.ReadFile(old)
		if err != nil {
			t.Fatal(err)
		}
		v2 := filepath.Join(t.TempDir(), "v2")
		if err := os.WriteFile(v2, oldData[:sizes[2]], 0o600); err != nil {
			t.Fatal(err)
		}
		journalOpen(t, v2, clock).Close() // the store, to the second transfer
		head := []byte("tblimit journal\n\x02\x00\x00\x00")
		head = binary.LittleEndian.AppendUint32(head, crc32.Checksum(head, crc32.MakeTable(crc32.Castagnoli)))
		if err := os.WriteFile(v2, append(head, oldData[sizes[2]:]...), 0o600); err != nil {
			t.Fatal(err)
		}
		j := journalOpen(t, v2, clock)
		if got := journalSnap(t, j, accounts, ids); !reflect.DeepEqual(got, want) {
			t.Fatalf("state of a version 2 journal:\n got %+v\nwant %+v", got.Accounts, want.Accounts)
		}
		if n, _ := j.Loaded(); n != int64(len(oldData))-sizes[2]+24 {
			t.Errorf("read %d bytes of a version 2 journal, want its %d", n, int64(len(oldData))-sizes[2]+24)
		}
		j.Close()
		if v, _ := journalVersion(t, v2); v != 3 {
			t.Errorf("a version 2 journal after a checkpoint: version %d, want 3", v)
		}
	})

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
	if v, _ := journalVersion(t, fresh); v != 3 {
		t.Errorf("a new journal after its first checkpoint: version %d, want 3", v)
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
	t.Run("version 3 without its store", func(t *testing.T) {
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
		if v, _ := journalVersion(t, again); v != 3 {
			t.Errorf("version %d after the conversion finished, want 3", v)
		}
	})
}

// journalHeader is the header of a journal of the given format version.
func journalHeader(version uint32) []byte {
	head := binary.LittleEndian.AppendUint32([]byte("tblimit journal\n"), version)
	return binary.LittleEndian.AppendUint32(head, crc32.Checksum(head, crc32.MakeTable(crc32.Castagnoli)))
}

// TestJournalRecordsEndBeforeLeftovers checks where the records of a
// journal that writes over its space end, on journals laid out as a crash
// leaves them: a checkpoint holds the requests up to the second transfer,
// the third and fourth were written over the space the first ones took,
// and what the first ones left follows. Leftovers end the records and are
// kept, without a report; a damaged record before them is a torn tail; a
// record stamped after the records' end, past damage or the end mark, is
// corruption.
func TestJournalRecordsEndBeforeLeftovers(t *testing.T) {
	clock0 := time.Unix(1_700_000_000, 0)
	dir := t.TempDir()
	sizes, snaps, ids := journalFill(t, filepath.Join(dir, "old"), embedded.NewManualClock(clock0), 4)
	data, err := os.ReadFile(filepath.Join(dir, "old"))
	if err != nil {
		t.Fatal(err)
	}
	accounts := data[24:sizes[0]]
	transfer := func(i int) []byte { return data[sizes[i-1]:sizes[i]] } // the i-th, from 1
	base := filepath.Join(dir, "base")
	if err := os.WriteFile(base, data[:sizes[2]], 0o600); err != nil {
		t.Fatal(err)
	}
	journalOpen(t, base, embedded.NewManualClock(clock0.Add(time.Hour))).Close() // its store holds them

	damaged := func(b []byte) []byte {
		b = bytes.Clone(b)
		b[30] ^= 0x10
		return b
	}
	mark := make([]byte, 24)
	t3, t4 := transfer(3), transfer(4)
	leftovers := slices.Concat(accounts, transfer(1), transfer(2))
	at4, end4 := int64(24+len(t3)), int64(24+len(t3)+len(t4))
	for _, c := range []struct {
		name      string
		journal   [][]byte
		transfers int   // the transfers the state holds
		recovered int64 // where a torn tail was cut, if one was (0: none)
		corrupt   int64 // where the corruption is said to be, if Open refuses
	}{
		{name: "records, end mark, leftovers", journal: [][]byte{t3, t4, mark, leftovers}, transfers: 4},
		{name: "end mark lost, leftovers at a record", journal: [][]byte{t3, t4, leftovers}, transfers: 4},
		{name: "end mark lost, leftovers within a record", journal: [][]byte{t3, t4, transfer(1)[7:], transfer(2)}, transfers: 4, recovered: end4},
		{name: "last record torn before leftovers", journal: [][]byte{t3, damaged(t4), mark, leftovers}, transfers: 3, recovered: at4},
		{name: "first record torn before leftovers", journal: [][]byte{damaged(t3), mark, leftovers}, transfers: 2, recovered: 24},
		{name: "a damaged record before a later one", journal: [][]byte{damaged(t3), t4, mark, leftovers}, corrupt: 24},
		{name: "an end mark before a later record", journal: [][]byte{t3, mark, t4, leftovers}, corrupt: at4},
		{name: "leftovers before a later record", journal: [][]byte{t3, transfer(1), t4}, corrupt: at4},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			if err := os.CopyFS(embedded.StorePath(path), os.DirFS(embedded.StorePath(base))); err != nil {
				t.Fatal(err)
			}
			image := slices.Concat(append([][]byte{journalHeader(3)}, c.journal...)...)
			if err := os.WriteFile(path, image, 0o600); err != nil {
				t.Fatal(err)
			}
			clock := embedded.NewManualClock(clock0.Add(time.Hour))
			if c.corrupt != 0 {
				j, err := embedded.Open(path, embedded.WithClock(clock))
				if err == nil {
					j.Close()
					t.Fatal("Open = nil error, want ErrCorrupt")
				}
				if !errors.Is(err, embedded.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", c.corrupt)) {
					t.Fatalf("Open = %v, want ErrCorrupt at offset %d", err, c.corrupt)
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(after, image) {
					t.Error("Open changed the journal it refused")
				}
				return
			}
			j := journalOpen(t, path, clock)
			switch r := j.Recovered(); {
			case c.recovered == 0 && r != nil:
				t.Fatalf("Recovered() = %v, want none: leftovers are no torn tail", r)
			case c.recovered != 0 && (r == nil || r.Offset != c.recovered):
				t.Fatalf("Recovered() = %+v, want a torn tail cut at %d", r, c.recovered)
			}
			clock.Set(clock0.Add(time.Duration(c.transfers) * time.Second))
			if got, want := journalSnap(t, j, []tb.Uint128{tb.ToUint128(1), tb.ToUint128(2)}, ids[:c.transfers]), snaps[c.transfers]; !reflect.DeepEqual(got, want) {
				t.Fatalf("state:\n got %+v\nwant %+v", got.Accounts, want.Accounts)
			}
			// The journal goes on over its space, and opens clean next time.
			clock.Set(clock0.Add(2 * time.Hour))
			journalGoesOn(t, j, path, clock, ids[:c.transfers])
		})
	}
}

// TestJournalWritesOverItsSpace checks that a journal checkpointed every
// few requests keeps to the space its first records took, and that every
// request survives Open.
func TestJournalWritesOverItsSpace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	clock := embedded.NewManualClock(time.Unix(1_700_000_000, 0))
	j, err := embedded.Open(path, embedded.WithClock(clock), embedded.WithCheckpointBytes(1<<10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.CreateAccounts([]tb.Account{{ID: tb.ToUint128(1), Ledger: 7, Code: 1}, {ID: tb.ToUint128(2), Ledger: 7, Code: 1}}); err != nil {
		t.Fatal(err)
	}
	var ids []tb.Uint128
	var written, largest int64
	smallest := int64(math.MaxInt64) // once a checkpoint came
	for i := range 200 {
		clock.Advance(time.Millisecond)
		id := tb.ToUint128(uint64(100 + i))
		ids = append(ids, id)
		journalTransfer(t, j, id)
		written += 24 + 128
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, st.Size())
		if written > 2<<10 {
			smallest = min(smallest, st.Size())
		}
		// The records end at a record header of zeros, whatever follows.
		if end := j.Size(); st.Size() > end {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			mark := make([]byte, 24)
			_, err = f.ReadAt(mark, end)
			f.Close()
			if err != nil || !bytes.Equal(mark, make([]byte, 24)) {
				t.Fatalf("after request %d the records end at %d, followed by %x (%v); want an end mark of 24 zero bytes", i, end, mark, err)
			}
		}
	}
	j.Close()
	// A checkpoint after every 1 KiB of records: a generation is at most
	// 1 KiB and a record, with its end mark, after the header.
	if limit := int64(24 + 1<<10 + 2*24 + 128); largest > limit || written < 10*limit {
		t.Fatalf("the journal took up to %d bytes for %d bytes of records; want at most %d", largest, written, limit)
	}
	if smallest < 1<<10 {
		t.Fatalf("the journal was %d bytes after a checkpoint: it gave back the space its records took, want it kept to write over", smallest)
	}
	j = journalOpen(t, path, clock)
	if ts, err := j.LookupTransfers(ids); err != nil || len(ts) != len(ids) {
		t.Fatalf("LookupTransfers = %d of %d, %v", len(ts), len(ids), err)
	}
}

// TestJournalStartsWithItsSpace checks that a new journal is made with the
// space of its records until the first checkpoint, zeros, and that a crash
// before that checkpoint leaves a journal whose records end at the first
// zeros, with nothing to report.
func TestJournalStartsWithItsSpace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal")
	clock := embedded.NewManualClock(time.Unix(1_700_000_000, 0))
	j, err := embedded.Open(path, embedded.WithClock(clock), embedded.WithCheckpointBytes(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if st, err := os.Stat(path); err != nil || st.Size() != 24+64<<10 {
		t.Fatalf("a new journal with a checkpoint every 64 KiB is %d bytes (%v), want 24+64 KiB", st.Size(), err)
	}
	if _, err := j.CreateAccounts([]tb.Account{{ID: tb.ToUint128(1), Ledger: 7, Code: 1}, {ID: tb.ToUint128(2), Ledger: 7, Code: 1}}); err != nil {
		t.Fatal(err)
	}
	ids := []tb.Uint128{tb.ToUint128(100), tb.ToUint128(101), tb.ToUint128(102)}
	for _, id := range ids {
		clock.Advance(time.Second)
		journalTransfer(t, j, id)
	}
	// The journal as a crash leaves it (its store holds no checkpoint yet).
	crashed := filepath.Join(dir, "crashed")
	copyFile(t, path, crashed)
	records := j.Size()
	j2 := journalOpen(t, crashed, clock)
	if r := j2.Recovered(); r != nil {
		t.Fatalf("Recovered() = %v, want none: the zeros after the records are the journal's space", r)
	}
	if n, _ := j2.Loaded(); n != records {
		t.Errorf("read %d bytes of records, want %d", n, records)
	}
	if ts, err := j2.LookupTransfers(ids); err != nil || len(ts) != len(ids) {
		t.Fatalf("LookupTransfers = %d of %d, %v", len(ts), len(ids), err)
	}
	if st, err := os.Stat(crashed); err != nil || st.Size() != 24+64<<10 {
		t.Errorf("the journal is %d bytes after Open (%v), want its space kept, 24+64 KiB", st.Size(), err)
	}
}

// TestJournalCheckpointBytesBelowOne checks that a checkpoint interval
// below one byte opens a journal (of one byte of space) that checkpoints
// every request, as one byte does.
func TestJournalCheckpointBytesBelowOne(t *testing.T) {
	for _, n := range []int64{1, -1} {
		path := filepath.Join(t.TempDir(), "journal")
		clock := embedded.NewManualClock(time.Unix(1_700_000_000, 0))
		j, err := embedded.Open(path, embedded.WithClock(clock), embedded.WithCheckpointBytes(n))
		if err != nil {
			t.Fatalf("WithCheckpointBytes(%d): %v", n, err)
		}
		if _, err := j.CreateAccounts([]tb.Account{{ID: tb.ToUint128(1), Ledger: 7, Code: 1}, {ID: tb.ToUint128(2), Ledger: 7, Code: 1}}); err != nil {
			t.Fatal(err)
		}
		journalTransfer(t, j, tb.ToUint128(100))
		if got := j.Size(); got != 24 {
			t.Errorf("WithCheckpointBytes(%d): the journal's records end at %d after a request, want 24 (checkpointed)", n, got)
		}
		j.Close()
	}
}
