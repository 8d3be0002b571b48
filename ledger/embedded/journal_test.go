//go:build unix

package embedded_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/ledger/embedded"
)

// journalOpen opens a journal with the given real clock and closes it when
// the test ends.
func journalOpen(t testing.TB, path string, clock embedded.Clock) *embedded.File {
	t.Helper()
	j, err := embedded.Open(path, embedded.WithClock(clock))
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	t.Cleanup(j.Close)
	return j
}

// journalSnapshot is everything a client can read about some accounts and
// transfers, timestamps included.
type journalSnapshot struct {
	Accounts  []tb.Account
	Transfers []tb.Transfer
	PerAcct   [][]tb.Transfer
	Balances  [][]tb.AccountBalance
	Query     []tb.Transfer
	Changes   []tb.ChangeEvent
}

func journalSnap(t testing.TB, c tb.Client, accounts, transfers []tb.Uint128) journalSnapshot {
	t.Helper()
	var s journalSnapshot
	var err error
	if s.Accounts, err = c.LookupAccounts(accounts); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(transfers); i += 8000 {
		ts, err := c.LookupTransfers(transfers[i:min(i+8000, len(transfers))])
		if err != nil {
			t.Fatal(err)
		}
		s.Transfers = append(s.Transfers, ts...)
	}
	for _, id := range accounts {
		f := tb.AccountFilter{AccountID: id, Limit: 8189, Flags: tb.AccountFilterFlags{Debits: true, Credits: true}.ToUint32()}
		ts, err := c.GetAccountTransfers(f)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := c.GetAccountBalances(f)
		if err != nil {
			t.Fatal(err)
		}
		s.PerAcct = append(s.PerAcct, ts)
		s.Balances = append(s.Balances, bs)
	}
	if s.Query, err = c.QueryTransfers(tb.QueryFilter{Ledger: 7, Limit: 8189}); err != nil {
		t.Fatal(err)
	}
	for from := uint64(0); ; {
		page, err := c.GetChangeEvents(tb.ChangeEventsFilter{TimestampMin: from, Limit: 2730})
		if err != nil {
			t.Fatal(err)
		}
		s.Changes = append(s.Changes, page...)
		if len(page) < 2730 {
			break
		}
		from = page[len(page)-1].Timestamp + 1
	}
	return s
}

// journalWorkload drives a File and a plain Engine in lockstep with the same
// requests at the same clock times, so that any difference between them, or
// between a File and the File reopened, shows.
type journalWorkload struct {
	t         *testing.T
	rng       *rand.Rand
	clock     *embedded.ManualClock
	accounts  []tb.Uint128
	transfers []tb.Uint128
	pending   []tb.Uint128
	next      uint64
}

func (w *journalWorkload) id() tb.Uint128 { w.next++; return tb.ToUint128(w.next) }

// batch returns a random request of transfers: plain and pending ones,
// posts and voids, linked pairs, retries of earlier IDs, and transfers
// that fail (over the limit, unknown accounts).
func (w *journalWorkload) batch() []tb.Transfer {
	var out []tb.Transfer
	n := 1 + w.rng.IntN(12)
	for range n {
		dr := w.accounts[w.rng.IntN(len(w.accounts))]
		cr := w.accounts[w.rng.IntN(len(w.accounts))]
		t := tb.Transfer{ID: w.id(), DebitAccountID: dr, CreditAccountID: cr, Amount: tb.ToUint128(uint64(1 + w.rng.IntN(40))), Ledger: 7, Code: 1}
		switch k := w.rng.IntN(10); {
		case k < 3:
		case k < 6:
			t.Flags = tb.TransferFlags{Pending: true}.ToUint16()
			t.Timeout = uint32(w.rng.IntN(4))
			w.pending = append(w.pending, t.ID)
		case k < 8 && len(w.pending) > 0:
			p := w.pending[w.rng.IntN(len(w.pending))]
			t = tb.Transfer{ID: w.id(), PendingID: p, Amount: tb.AmountMax, Ledger: 7, Code: 1}
			if k == 6 {
				t.Flags = tb.TransferFlags{PostPendingTransfer: true}.ToUint16()
			} else {
				t.Flags = tb.TransferFlags{VoidPendingTransfer: true}.ToUint16()
				t.Amount = tb.ToUint128(0)
			}
		case k == 8 && len(w.transfers) > 0:
			t.ID = w.transfers[w.rng.IntN(len(w.transfers))] // a retry: exists, exists_with_*, id_already_failed
		default:
			t.Flags = tb.TransferFlags{Linked: true}.ToUint16()
			out = append(out, t)
			t = tb.Transfer{ID: w.id(), DebitAccountID: cr, CreditAccountID: dr, Amount: tb.ToUint128(uint64(1 + w.rng.IntN(40))), Ledger: 7, Code: 2}
		}
		out = append(out, t)
	}
	for _, t := range out {
		w.transfers = append(w.transfers, t.ID)
	}
	return out
}

func TestJournalReplaysExactly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	clock := embedded.NewManualClock(time.Unix(1_700_000_000, 0))
	engine := embedded.New(embedded.WithClock(clock))
	file := journalOpen(t, path, clock)
	w := &journalWorkload{t: t, rng: rand.New(rand.NewPCG(1, 2)), clock: clock}

	accounts := []tb.Account{{ID: w.id(), Ledger: 7, Code: 1}}
	for i := range 6 {
		a := tb.Account{ID: w.id(), Ledger: 7, Code: 1}
		switch i % 3 {
		case 0:
			a.Flags = tb.AccountFlags{DebitsMustNotExceedCredits: true, History: true}.ToUint16()
		case 1:
			a.Flags = tb.AccountFlags{History: true}.ToUint16()
		}
		accounts = append(accounts, a)
	}
	for _, a := range accounts {
		w.accounts = append(w.accounts, a.ID)
	}
	r1, err1 := engine.CreateAccounts(accounts)
	r2, err2 := file.CreateAccounts(accounts)
	if err1 != nil || err2 != nil || !reflect.DeepEqual(r1, r2) {
		t.Fatalf("CreateAccounts: engine %v %v, file %v %v", r1, err1, r2, err2)
	}
	// Funds for the limited accounts.
	var funding []tb.Transfer
	for _, a := range w.accounts[1:] {
		funding = append(funding, tb.Transfer{ID: w.id(), DebitAccountID: w.accounts[0], CreditAccountID: a, Amount: tb.ToUint128(100), Ledger: 7, Code: 9})
	}

	step := func(i int, ts []tb.Transfer) {
		t.Helper()
		r1, err1 := engine.CreateTransfers(ts)
		r2, err2 := file.CreateTransfers(ts)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(r1, r2) {
			t.Fatalf("step %d: CreateTransfers: engine %v %v, file %v %v", i, r1, err1, r2, err2)
		}
	}
	step(-1, funding)
	for i := range 300 {
		switch w.rng.IntN(4) {
		case 0: // no time passes: the next request is stamped just after the last
		case 1:
			clock.Advance(time.Duration(w.rng.IntN(1000)) * time.Microsecond)
		default:
			clock.Advance(time.Duration(w.rng.IntN(1500)) * time.Millisecond)
		}
		if w.rng.IntN(3) == 0 { // a read: expires what is due, moves the engine's last timestamp
			a1, err1 := engine.LookupAccounts(w.accounts)
			a2, err2 := file.LookupAccounts(w.accounts)
			if err1 != nil || err2 != nil || !reflect.DeepEqual(a1, a2) {
				t.Fatalf("step %d: LookupAccounts: engine %v %v, file %v %v", i, a1, err1, a2, err2)
			}
		}
		step(i, w.batch())
		if i%100 == 99 {
			before := journalSnap(t, file, w.accounts, w.transfers)
			file.Close()
			file = journalOpen(t, path, clock)
			if r := file.Recovered(); r != nil {
				t.Fatalf("step %d: reopen recovered %v, want an intact journal", i, r)
			}
			// Close checkpointed every request into the store.
			if got := file.Records(); got != 0 {
				t.Fatalf("step %d: reopened journal has %d records, want 0", i, got)
			}
			after := journalSnap(t, file, w.accounts, w.transfers)
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("step %d: state after reopen differs from before:\nbefore %+v\nafter  %+v", i, before.Accounts, after.Accounts)
			}
			if !reflect.DeepEqual(after, journalSnap(t, engine, w.accounts, w.transfers)) {
				t.Fatalf("step %d: reopened file differs from the engine", i)
			}
			// The engine saw reads the journal does not replay: let the
			// clock pass the timestamps they used up, as real time does.
			clock.Advance(time.Millisecond)
		}
	}
	st := file.Stats()
	if changes := journalSnap(t, file, nil, nil).Changes; len(changes) != int(st.Transfers+st.Expired) {
		t.Fatalf("%d change events, want %d", len(changes), st.Transfers+st.Expired)
	}
	if st.Transfers == 0 || st.Expired == 0 {
		t.Fatalf("the workload created %d transfers and expired %d: want both", st.Transfers, st.Expired)
	}
}

// journalFill writes n create_transfers records of one transfer each and
// returns the journal's size after each (sizes[0] is the empty journal),
// and the state after each.
func journalFill(t *testing.T, path string, clock *embedded.ManualClock, n int) (sizes []int64, snaps []journalSnapshot, ids []tb.Uint128) {
	t.Helper()
	j, err := embedded.Open(path, embedded.WithClock(clock), embedded.WithoutCheckpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	a, b := tb.ToUint128(1), tb.ToUint128(2)
	if _, err := j.CreateAccounts([]tb.Account{{ID: a, Ledger: 7, Code: 1}, {ID: b, Ledger: 7, Code: 1}}); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	sizes = append(sizes, size())
	snaps = append(snaps, journalSnap(t, j, []tb.Uint128{a, b}, ids))
	for i := range n {
		clock.Advance(time.Second)
		id := tb.ToUint128(uint64(100 + i))
		ids = append(ids, id)
		res, err := j.CreateTransfers([]tb.Transfer{{ID: id, DebitAccountID: a, CreditAccountID: b, Amount: tb.ToUint128(uint64(i + 1)), Timeout: 2, Ledger: 7, Code: 1, Flags: tb.TransferFlags{Pending: true}.ToUint16()}})
		if err != nil || res[0].Status != tb.TransferCreated {
			t.Fatalf("CreateTransfers = %v, %v", res, err)
		}
		sizes = append(sizes, size())
		snaps = append(snaps, journalSnap(t, j, []tb.Uint128{a, b}, ids))
	}
	return sizes, snaps, ids
}

// journalTransfer has j create a transfer of one unit from account 1 to
// account 2 on ledger 7, the accounts journalFill makes.
func journalTransfer(t testing.TB, j *embedded.File, id tb.Uint128) {
	t.Helper()
	res, err := j.CreateTransfers([]tb.Transfer{{ID: id, DebitAccountID: tb.ToUint128(1), CreditAccountID: tb.ToUint128(2), Amount: tb.ToUint128(1), Ledger: 7, Code: 1}})
	if err != nil || res[0].Status != tb.TransferCreated {
		t.Fatalf("CreateTransfers(%v) = %v, %v", id, res, err)
	}
}

// journalGoesOn checks that journal j, opened at path after a crash,
// takes a request, and opens clean next time with the transfers kept and
// that request.
func journalGoesOn(t testing.TB, j *embedded.File, path string, clock embedded.Clock, kept []tb.Uint128) {
	t.Helper()
	journalTransfer(t, j, tb.ToUint128(999))
	j.Close()
	j2 := journalOpen(t, path, clock)
	if r := j2.Recovered(); r != nil {
		t.Fatalf("second Open recovered %v, want an intact journal", r)
	}
	want := append(slices.Clone(kept), tb.ToUint128(999))
	if ts, _ := j2.LookupTransfers(want); len(ts) != len(want) {
		t.Fatalf("after a second Open, %d of the %d transfers", len(ts), len(want))
	}
}

func TestJournalTornTailIsCut(t *testing.T) {
	clock0 := time.Unix(1_700_000_000, 0)
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig")
	clock := embedded.NewManualClock(clock0)
	sizes, snaps, ids := journalFill(t, orig, clock, 4)
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	last := sizes[len(sizes)-2] // the last record starts here
	recLen := sizes[len(sizes)-1] - last
	type tc struct {
		name string
		data []byte
	}
	var cases []tc
	for _, cut := range []int64{1, 4, 12, 23, 24, 25, recLen / 2, recLen - 1} {
		cases = append(cases, tc{fmt.Sprintf("cut %d bytes into the last record", cut), data[:last+cut]})
	}
	flip := func(at int64) []byte {
		d := bytes.Clone(data)
		d[at] ^= 0x40
		return d
	}
	cases = append(cases,
		tc{"last record's payload damaged", flip(last + 24 + 5)},
		tc{"last record's time damaged", flip(last + 9)},
		tc{"last record's length damaged", flip(last + 17)},
		tc{"last record's magic damaged", flip(last)},
		tc{"zeros after the last record's header", append(bytes.Clone(data[:last+24]), make([]byte, 4096)...)},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			if err := os.WriteFile(path, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			clock := embedded.NewManualClock(clock0.Add(time.Hour))
			j := journalOpen(t, path, clock)
			r := j.Recovered()
			if r == nil || r.Offset != last || r.Dropped != int64(len(c.data))-last || r.Path != path {
				t.Fatalf("Recovered() = %+v, want the tail from offset %d (%d bytes) cut", r, last, int64(len(c.data))-last)
			}
			if !strings.Contains(r.String(), path) || !strings.Contains(r.String(), fmt.Sprint(last)) {
				t.Errorf("Recovery.String() = %q, want the path and offset", r)
			}
			// The intact records went to the store, and the journal's
			// records start again after its header.
			if j.Size() != 24 || j.Records() != 0 {
				t.Errorf("records after recovery end at %d (%d of them), want 24 (none)", j.Size(), j.Records())
			}
			// The state is the one before the last request, read at the
			// time it was taken.
			clock.Set(clock0.Add(time.Duration(len(ids)-1) * time.Second))
			want := snaps[len(snaps)-2]
			if got := journalSnap(t, j, []tb.Uint128{tb.ToUint128(1), tb.ToUint128(2)}, ids[:len(ids)-1]); !reflect.DeepEqual(got, want) {
				t.Fatalf("state after recovery:\n got %+v\nwant %+v", got.Accounts, want.Accounts)
			}
			journalGoesOn(t, j, path, clock, ids[:len(ids)-1])
		})
	}
}

func TestJournalCorruptionIsRefused(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig")
	sizes, _, _ := journalFill(t, orig, embedded.NewManualClock(time.Unix(1_700_000_000, 0)), 4)
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	second := sizes[2] // a record in the middle
	for _, c := range []struct {
		name string
		at   int64
	}{
		{"payload", second + 30},
		{"magic", second + 1},
		{"length", second + 16},
		{"checksum", second + 21},
		{"file header", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			bad := bytes.Clone(data)
			bad[c.at] ^= 0x01
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := embedded.Open(path)
			if err == nil {
				j.Close()
				t.Fatalf("Open of a journal damaged in its %s = nil error, want ErrCorrupt", c.name)
			}
			if !errors.Is(err, embedded.ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open = %v, want ErrCorrupt naming %s", err, path)
			}
			if c.name != "file header" && !strings.Contains(err.Error(), fmt.Sprintf("offset %d", second)) {
				t.Errorf("Open = %v, want the offset %d of the damaged record", err, second)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
				t.Errorf("Open changed a journal it refused")
			}
		})
	}
}

func TestJournalRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"text":         "hello, world: not a journal at all\n",
		"short text":   "hi",
		"other header": "tblimit journal\n\x07\x00\x00\x00\x00\x00\x00\x00",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if j, err := embedded.Open(path); err == nil {
			j.Close()
			t.Errorf("Open(%s file) = nil error, want ErrCorrupt", name)
		} else if !errors.Is(err, embedded.ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Errorf("Open(%s file) = %v, want ErrCorrupt naming the file", name, err)
		}
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Errorf("Open changed a %s file it refused", name)
		}
	}
	// A journal whose creation was cut short is started again.
	for name, content := range map[string]string{"empty": "", "half a header": "tblimit jour", "zeros": "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := embedded.Open(path)
		if err != nil {
			t.Fatalf("Open(%s file) = %v, want a new journal", name, err)
		}
		if (j.Recovered() != nil) != (content != "") {
			t.Errorf("Open(%s file): Recovered() = %v", name, j.Recovered())
		}
		j.Close()
	}
}

func TestJournalBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = embedded.Open(path)
	if !errors.Is(err, embedded.ErrBusy) || !strings.Contains(err.Error(), path+" is in use by another process") {
		t.Fatalf("second Open = %v, want ErrBusy naming %s", err, path)
	}
	j.Close()
	j, err = embedded.Open(path)
	if err != nil {
		t.Fatalf("Open after Close = %v", err)
	}
	j.Close()
}

// Close releases the journal's lock even while another descriptor of the
// same open file lives on, as in a child that any goroutine of the process
// forks holds one until it execs: the next Open must not find it busy.
func TestJournalCloseReleasesLockOfCopies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to find the journal's descriptor: %v", err)
	}
	for _, e := range ents {
		if dst, _ := os.Readlink("/proc/self/fd/" + e.Name()); dst == path {
			fmt.Sscan(e.Name(), &fd)
		}
	}
	if fd < 0 {
		t.Fatalf("no descriptor of %s in /proc/self/fd", path)
	}
	copied, err := syscall.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(copied)
	j.Close()
	j, err = embedded.Open(path)
	if err != nil {
		t.Fatalf("Open after Close, with a copy of the closed descriptor open = %v", err)
	}
	j.Close()
}

func TestJournalClosed(t *testing.T) {
	j, err := embedded.Open(filepath.Join(t.TempDir(), "journal"))
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	j.Close()
	if _, err := j.CreateAccounts([]tb.Account{{ID: tb.ToUint128(1), Ledger: 1, Code: 1}}); !errors.Is(err, tb.ErrClientClosed) {
		t.Errorf("CreateAccounts after Close = %v, want ErrClientClosed", err)
	}
	if _, err := j.LookupAccounts([]tb.Uint128{tb.ToUint128(1)}); !errors.Is(err, tb.ErrClientClosed) {
		t.Errorf("LookupAccounts after Close = %v, want ErrClientClosed", err)
	}
	if err := j.Nop(); !errors.Is(err, tb.ErrClientClosed) {
		t.Errorf("Nop after Close = %v, want ErrClientClosed", err)
	}
}

func TestJournalTooMuchDataWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j := journalOpen(t, path, embedded.NewManualClock(time.Unix(1_700_000_000, 0)))
	if _, err := j.CreateTransfers(make([]tb.Transfer, 8190)); !errors.Is(err, tb.ErrTooMuchData) {
		t.Fatalf("CreateTransfers(8190) = %v, want ErrTooMuchData", err)
	}
	if j.Records() != 0 {
		t.Fatalf("Records() = %d after a refused request, want 0", j.Records())
	}
}

// The payload is TigerBeetle's binary layout: the bytes of tb.Account and
// tb.Transfer as the client hands them to the C library.
func TestJournalLayoutIsTigerBeetles(t *testing.T) {
	if unsafe.Sizeof(tb.Account{}) != 128 || unsafe.Sizeof(tb.Transfer{}) != 128 {
		t.Fatalf("tb.Account is %d bytes, tb.Transfer %d: want 128", unsafe.Sizeof(tb.Account{}), unsafe.Sizeof(tb.Transfer{}))
	}
	var probe uint16 = 1
	if *(*byte)(unsafe.Pointer(&probe)) != 1 {
		t.Skip("big-endian machine: TigerBeetle runs on little-endian ones only")
	}
	path := filepath.Join(t.TempDir(), "journal")
	j := journalOpen(t, path, embedded.NewManualClock(time.Unix(1_700_000_000, 0)))
	var a tb.Account
	var tr tb.Transfer
	for i, p := range []*[128]byte{(*[128]byte)(unsafe.Pointer(&a)), (*[128]byte)(unsafe.Pointer(&tr))} {
		for k := range p {
			p[k] = byte(k*7 + i + 1)
		}
	}
	if _, err := j.CreateAccounts([]tb.Account{a}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.CreateTransfers([]tb.Transfer{tr}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const header, record = 24, 24 + 128
	if j.Size() != header+2*record || int64(len(data)) < j.Size() {
		t.Fatalf("journal's records end at %d in a file of %d bytes, want at %d", j.Size(), len(data), header+2*record)
	}
	if rest := data[j.Size():]; !bytes.Equal(rest, make([]byte, len(rest))) {
		t.Errorf("the file's space after the records is not zeros (end marks)")
	}
	data = data[:j.Size()]
	if got, want := data[header+24:header+record], (*[128]byte)(unsafe.Pointer(&a))[:]; !bytes.Equal(got, want) {
		t.Errorf("account payload\n got %s\nwant %s", hex.EncodeToString(got), hex.EncodeToString(want))
	}
	if got, want := data[header+record+24:], (*[128]byte)(unsafe.Pointer(&tr))[:]; !bytes.Equal(got, want) {
		t.Errorf("transfer payload\n got %s\nwant %s", hex.EncodeToString(got), hex.EncodeToString(want))
	}
}

// TestJournalKillChild is the process TestJournalSurvivesKill kills: it
// creates transfers until it is killed, printing the last ID of each
// request once the request returned.
func TestJournalKillChild(t *testing.T) {
	path := os.Getenv("TBLIMIT_JOURNAL_KILL_CHILD")
	if path == "" {
		t.Skip("run by TestJournalSurvivesKill")
	}
	j, err := embedded.Open(path)
	if err != nil {
		fmt.Println("error", err)
		return
	}
	// Checkpoints every few requests, so that kills land in them too.
	embedded.SetCheckpointBytes(j, 256<<10)
	a, b := tb.ToUint128(1), tb.ToUint128(2)
	if _, err := j.CreateAccounts([]tb.Account{{ID: a, Ledger: 7, Code: 1}, {ID: b, Ledger: 7, Code: 1}}); err != nil {
		fmt.Println("error", err)
		return
	}
	// Writers at once, so that their requests share fsyncs (group commit),
	// and some of them provisioned ahead of their create (deferred).
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format, args...)
		out.Flush()
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(w)))
			for {
				if rng.IntN(4) == 0 {
					if _, err := j.CreateAccountsDeferred([]tb.Account{{ID: tb.ID(), Ledger: 7, Code: 2}}); err != nil {
						say("error %v\n", err)
						return
					}
				}
				n := 1 + rng.IntN(8189)
				if rng.IntN(2) == 0 {
					n = 1 + rng.IntN(20)
				}
				ts := make([]tb.Transfer, n)
				for i := range ts {
					ts[i] = tb.Transfer{ID: tb.ID(), DebitAccountID: a, CreditAccountID: b, Amount: tb.ToUint128(1), Ledger: 7, Code: 1}
				}
				res, err := j.CreateTransfers(ts)
				if err != nil {
					say("error %v\n", err)
					return
				}
				for _, r := range res {
					if r.Status != tb.TransferCreated {
						say("error %v\n", r.Status)
						return
					}
				}
				last := ts[n-1].ID.Bytes()
				say("ack %d %s\n", n, hex.EncodeToString(last[:]))
			}
		})
	}
	wg.Wait()
}

// Every acknowledged request survives kill -9 at any moment, and the
// journal always opens afterwards.
func TestJournalSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the kill -9 test")
	}
	path := filepath.Join(t.TempDir(), "journal")
	rng := rand.New(rand.NewPCG(7, 7))
	var acked []tb.Uint128
	var total uint64
	recovered := 0
	for round := range 6 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestJournalKillChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), "TBLIMIT_JOURNAL_KILL_CHILD="+path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		want := 1 + rng.IntN(30) // acknowledgements before the kill
		got := 0
		for got < want && lines.Scan() {
			f := strings.Fields(lines.Text())
			if len(f) == 0 {
				continue
			}
			if f[0] == "error" {
				t.Fatalf("round %d: child: %s", round, lines.Text())
			}
			if f[0] != "ack" {
				continue
			}
			raw, err := hex.DecodeString(f[2])
			if err != nil || len(raw) != 16 {
				t.Fatalf("round %d: bad line %q", round, lines.Text())
			}
			var n uint64
			fmt.Sscan(f[1], &n)
			total += n
			acked = append(acked, tb.BytesToUint128([16]byte(raw)))
			got++
		}
		// Kill at a random moment after the last acknowledgement read:
		// often in the middle of the next write.
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		// Acknowledgements the child printed before it died count too.
		for lines.Scan() {
			f := strings.Fields(lines.Text())
			if len(f) == 3 && f[0] == "ack" {
				raw, err := hex.DecodeString(f[2])
				if err != nil || len(raw) != 16 {
					continue // cut short by the kill
				}
				var n uint64
				fmt.Sscan(f[1], &n)
				total += n
				acked = append(acked, tb.BytesToUint128([16]byte(raw)))
			}
		}

		j, err := embedded.Open(path)
		if err != nil {
			t.Fatalf("round %d: Open after kill -9 = %v", round, err)
		}
		if r := j.Recovered(); r != nil {
			recovered++
			t.Logf("round %d: %v", round, r)
		}
		found, err := j.LookupTransfers(acked)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != len(acked) {
			t.Fatalf("round %d: %d of %d acknowledged requests survived kill -9", round, len(found), len(acked))
		}
		accounts, err := j.LookupAccounts([]tb.Uint128{tb.ToUint128(2)})
		if err != nil || len(accounts) != 1 {
			t.Fatalf("round %d: LookupAccounts = %v, %v", round, accounts, err)
		}
		if credits, _ := accounts[0].CreditsPosted.Uint64(); credits < total {
			t.Fatalf("round %d: %d units credited, want at least the %d acknowledged", round, credits, total)
		}
		j.Close()
	}
	t.Logf("%d acknowledged requests (%d transfers) survived 6 kills; %d torn tails cut", len(acked), total, recovered)
}

// TestJournalClockOutOfRange checks that a journal refuses a request whose
// timestamps would pass 2^63 - 1 before writing it.
func TestJournalClockOutOfRange(t *testing.T) {
	end := time.Unix(0, math.MaxInt64)
	path := filepath.Join(t.TempDir(), "journal")
	jclock := embedded.NewManualClock(epoch)
	j := journalOpen(t, path, jclock)
	if _, err := j.CreateAccounts([]tb.Account{{ID: u(1), Ledger: 1, Code: 1}}); err != nil {
		t.Fatal(err)
	}
	jclock.Set(end)
	if _, err := j.CreateAccounts([]tb.Account{{ID: u(2), Ledger: 1, Code: 1}}); !errors.Is(err, embedded.ErrClockOutOfRange) {
		t.Fatalf("File.CreateAccounts at the end of time: error %v, want ErrClockOutOfRange", err)
	}
	if n := j.Records(); n != 1 {
		t.Fatalf("journal holds %d records, want 1", n)
	}
	j.Close()
	j2 := journalOpen(t, path, embedded.NewManualClock(epoch))
	got, err := j2.LookupAccounts([]tb.Uint128{u(1), u(2)})
	if err != nil || len(got) != 1 {
		t.Fatalf("after reopening: LookupAccounts = %d accounts, %v; want 1", len(got), err)
	}
}

// Concurrent create requests share their fsyncs; a lone one waits for one
// of its own; accounts written ahead of a create are made durable by its
// fsync; and Close makes durable what is left.
func TestJournalGroupCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := tb.ToUint128(1), tb.ToUint128(2)
	if _, err := j.CreateAccounts([]tb.Account{{ID: a, Ledger: 7, Code: 1}, {ID: b, Ledger: 7, Code: 1}}); err != nil {
		t.Fatal(err)
	}
	transfer := func() []tb.Transfer {
		return []tb.Transfer{{ID: tb.ID(), DebitAccountID: a, CreditAccountID: b, Amount: tb.ToUint128(1), Ledger: 7, Code: 1}}
	}
	syncs := j.Syncs()
	for range 5 {
		if _, err := j.CreateTransfers(transfer()); err != nil {
			t.Fatal(err)
		}
	}
	if got := j.Syncs() - syncs; got != 5 {
		t.Errorf("5 requests one after the other: %d fsyncs, want 5", got)
	}
	syncs = j.Syncs()
	const writers, each = 32, 20
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := j.CreateTransfers(transfer()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := j.Syncs() - syncs; got >= writers*each || got < 1 {
		t.Errorf("%d requests at once: %d fsyncs, want fewer (shared)", writers*each, got)
	} else {
		t.Logf("%d requests at once: %d fsyncs", writers*each, got)
	}
	syncs = j.Syncs()
	ahead := tb.ID()
	if _, err := j.CreateAccountsDeferred([]tb.Account{{ID: ahead, Ledger: 7, Code: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := j.Syncs() - syncs; got != 0 {
		t.Errorf("accounts written ahead: %d fsyncs, want none", got)
	}
	if _, err := j.CreateTransfers(transfer()); err != nil {
		t.Fatal(err)
	}
	if got := j.Syncs() - syncs; got != 1 {
		t.Errorf("accounts ahead and the create after them: %d fsyncs, want 1", got)
	}
	late := tb.ID()
	if _, err := j.CreateAccountsDeferred([]tb.Account{{ID: late, Ledger: 7, Code: 1}}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j, err = embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if got := j.Records(); got != 0 {
		t.Errorf("reopened: %d records in the journal, want 0 (Close checkpoints them into the store)", got)
	}
	if found, err := j.LookupAccounts([]tb.Uint128{ahead, late}); err != nil || len(found) != 2 {
		t.Errorf("reopened: accounts written ahead = %v, %v; want both", found, err)
	}
}

// A File told to refuse create requests turns each away, applying nothing,
// with an error that says it was not applied; reads go on; told to take
// them again, it does. Size is what the next Open replays.
func TestJournalRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Close() }()
	acct := func(id uint64) []tb.Account {
		return []tb.Account{{ID: tb.ToUint128(id), Ledger: 1, Code: 1}}
	}
	if res, err := j.CreateAccounts(acct(1)); err != nil || len(res) != 1 || res[0].Status != tb.AccountCreated {
		t.Fatalf("CreateAccounts = %v, %v", res, err)
	}
	size := j.Size()
	why := errors.New("out of room")
	j.Refuse(why)
	_, err = j.CreateAccounts(acct(2))
	var u interface{ Unavailable() bool }
	if !errors.Is(err, embedded.ErrRefused) || !errors.Is(err, why) || !errors.As(err, &u) || !u.Unavailable() {
		t.Fatalf("CreateAccounts while refusing = %v, want ErrRefused and the reason, unavailable", err)
	}
	if _, err := j.CreateTransfers([]tb.Transfer{{ID: tb.ToUint128(9), DebitAccountID: tb.ToUint128(1), CreditAccountID: tb.ToUint128(1), Ledger: 1, Code: 1}}); !errors.Is(err, embedded.ErrRefused) {
		t.Fatalf("CreateTransfers while refusing = %v, want ErrRefused", err)
	}
	if got, err := j.LookupAccounts([]tb.Uint128{tb.ToUint128(1), tb.ToUint128(2)}); err != nil || len(got) != 1 {
		t.Fatalf("LookupAccounts while refusing = %v, %v; want account 1 alone", got, err)
	}
	if j.Size() != size {
		t.Fatalf("Size after refusals = %d, want %d: nothing written", j.Size(), size)
	}
	j.Refuse(nil)
	if res, err := j.CreateAccounts(acct(2)); err != nil || len(res) != 1 || res[0].Status != tb.AccountCreated {
		t.Fatalf("CreateAccounts after Refuse(nil) = %v, %v", res, err)
	}
	if j.Size() <= size {
		t.Fatalf("Size after a request = %d, want more than %d", j.Size(), size)
	}
	j.Close()
	if j, err = embedded.Open(path); err != nil {
		t.Fatal(err)
	}
	// Close checkpointed the requests: the journal is its header alone.
	if n, took := j.Loaded(); n != 24 || took <= 0 {
		t.Fatalf("Loaded = %d, %v; want the 24 bytes of the header, in some time", n, took)
	}
	if got, err := j.LookupAccounts([]tb.Uint128{tb.ToUint128(1), tb.ToUint128(2)}); err != nil || len(got) != 2 {
		t.Fatalf("LookupAccounts after reopening = %v, %v; want both", got, err)
	}
}
