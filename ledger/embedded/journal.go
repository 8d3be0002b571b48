//go:build unix

package embedded

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// The journal's errors.
var (
	// ErrBusy means another process has the journal open: only one
	// process at a time may open a journal.
	ErrBusy = errors.New("embedded: journal busy")
	// ErrCorrupt means a journal is damaged somewhere other than at its
	// tail, or is not a journal at all: Open refuses it rather than drop
	// acknowledged requests that follow the damage.
	ErrCorrupt = errors.New("embedded: journal corrupt")
	// ErrJournalFailed means a write or fsync of the journal failed: the
	// File refuses every later create request (reads still work, and may
	// show requests that were applied but failed to be made durable),
	// because after a failed fsync the file's contents are unknown. Close
	// it and Open the journal again.
	ErrJournalFailed = errors.New("embedded: journal write failed")
	// ErrRefused means the File was told to take no more create requests
	// (Refuse), reads still being served: the process that holds it is
	// near the end of its memory, say. A call refused so is not applied,
	// and may be retried when the File takes requests again.
	ErrRefused = errors.New("embedded: create requests refused")
)

// refusal is the error of a create request that Refuse turned away.
type refusal struct{ why error }

func (r *refusal) Error() string   { return fmt.Sprintf("%v: %v", ErrRefused, r.why) }
func (r *refusal) Unwrap() []error { return []error{ErrRefused, r.why} }

// Unavailable reports that the request was not applied, as when a cluster
// does not answer (package ledger then applies its OnUnavailable).
func (r *refusal) Unavailable() bool { return true }

// File is an embedded engine kept in an append-only journal file, so that
// its state outlives the process: provisioning in one process and acquiring
// in the next works, and every acknowledged request survives a crash or kill
// -9 at any moment. It implements tb.Client like Engine; create one with Open
// and Close it when done. A File is safe for concurrent use; requests are
// applied one at a time.
//
// # What is stored
//
// An engine's state is a function of its create requests (create_accounts,
// create_transfers) and of the cluster time each was applied at: expiry is a
// pure function of time, and reads change nothing else. So the journal holds
// exactly those requests, and replaying them at their recorded times
// rebuilds the same state, timestamps, failed IDs and expiries included.
//
// Every create request is handled under the File's lock, in this order: its
// time t is read from the real clock (moved past every timestamp the engine
// has issued, so that the engine stamps the request at exactly t live and on
// replay); one record (the operation, t, the events) is appended to the
// file; the engine's clock is set to t and the request is applied. Then,
// outside the lock, the file is fsynced up to the record, and the results
// are returned. A request whose call returned is therefore on disk, with
// every record before it. The fsync is a group commit: one fsync makes
// every record written before it durable, so concurrent requests that
// wrote while another's fsync ran share the next one, and a lone request
// waits for one fsync. Reads set the engine's clock to the real clock's
// time and are not recorded; they may see a request whose fsync has not
// returned yet (nothing outside the process sees it before its call
// returns, and a crash takes the reader with it). A request of more than
// 8189 events is refused with tb.ErrTooMuchData before anything is
// written.
//
// # Format
//
// All integers are little-endian. The file starts with a 24-byte header:
//
//	 0  [16]byte  "tblimit journal\n"
//	16  uint32    format version: 1
//	20  uint32    CRC32C (Castagnoli) of bytes 0..20
//
// followed by one record per create request, back to back:
//
//	 0  uint32    magic 0x4a4c4254 ("TBLJ")
//	 4  uint8     operation: 1 create_accounts, 2 create_transfers
//	 5  [3]byte   zero
//	 8  uint64    cluster time t, nanoseconds since the Unix epoch
//	16  uint32    payload length: 128 bytes per event, 1 to 8189 events
//	20  uint32    CRC32C of the record's bytes 0..20 and of its payload
//	24  payload   the events in TigerBeetle's binary layout: tb.Account or
//	              tb.Transfer, 128 bytes each, as on the wire
//
// # Recovery
//
// Open replays the whole journal. A damaged tail (an incomplete last
// record, or a last record whose checksum fails, with nothing intact after
// it) is a write that was cut short by a crash: its fsync never returned, so
// it was never acknowledged. Open truncates it, keeps the intact prefix and
// reports it (Recovered). A damaged record followed by an intact one is not
// a torn write but corruption: Open refuses the file with an error wrapping
// ErrCorrupt that names the file and the offset, and changes nothing. A file
// that is not a journal is refused too, never overwritten.
//
// # Locking
//
// Open takes an exclusive, non-blocking flock on the file for as long as the
// File is open: a second Open, from this process or another, fails at once
// with an error wrapping ErrBusy. Close releases it; so does the death of the
// process.
//
// # Cost
//
// A create request costs one write and a share of one fsync (from a tenth
// of a millisecond to a few milliseconds, by disk), whatever its size:
// batch events. Concurrent requests share their fsyncs, and package
// ledger's pipeline sends the accounts of a batch's new users without
// waiting for theirs (CreateAccountsDeferred): the batch's create, which
// follows at once, makes both durable with one. The state lives in memory
// and is rebuilt from the whole journal on every Open, which takes time in
// proportion to the events ever created (about two seconds per million on
// a 2-core machine). The journal only grows, by 152 bytes per event or
// less; compacting it into a snapshot is future work.
//
// File is available on Unix systems (it needs flock).
type File struct {
	path  string
	eng   *Engine
	clock *ManualClock // the engine's clock, moved by the File
	real  Clock        // the time requests are stamped with

	mu        sync.Mutex
	f         *os.File
	end       int64 // the offset just after the last record written
	buf       []byte
	failed    error
	closed    bool
	records   int
	recovered *Recovery
	refused   error // see Refuse

	// Open replayed the journal's first replayed bytes in loaded.
	replayed int64
	loaded   time.Duration

	// syncMu is held while the journal is fsynced; synced is the offset up
	// to which it is known durable (syncMu). Taken before mu, never after.
	syncMu sync.Mutex
	synced int64
	syncs  int // fsyncs of records made (syncMu)
}

var _ tb.Client = (*File)(nil)

// Recovery describes a torn tail that Open cut off a journal.
type Recovery struct {
	// Path is the journal.
	Path string
	// Offset is where the intact prefix ends: the journal's new size.
	Offset int64
	// Dropped is how many bytes were cut off.
	Dropped int64
	// Reason says what was wrong with the first dropped record.
	Reason string
}

// String describes the recovery for people.
func (r Recovery) String() string {
	return fmt.Sprintf("%s: cut a torn tail of %d bytes at offset %d (%s): a write interrupted by a crash, never acknowledged; everything before it was kept",
		r.Path, r.Dropped, r.Offset, r.Reason)
}

const (
	fileMagic      = "tblimit journal\n"
	fileVersion    = 1
	fileHeaderSize = 24

	recordMagic      = 0x4a4c4254 // "TBLJ"
	recordHeaderSize = 24
	eventSize        = 128
	journalBatchMax  = 8189

	opAccounts  = 1
	opTransfers = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Open opens the journal at path, creating it if it does not exist, and
// replays it. opts configure the engine as for New; a clock given with
// WithClock is the real clock that requests are stamped with (the system
// clock by default). Open fails with an error wrapping ErrBusy if another
// File has the journal open, and ErrCorrupt if it is damaged other than at
// its tail; a torn tail is cut off and reported by Recovered.
func Open(path string, opts ...Option) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded: open journal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is in use by another process", ErrBusy, path)
		}
		return nil, fmt.Errorf("embedded: lock journal %s: %w", path, err)
	}
	// The clock given in opts, if any, read through an engine of its own.
	real := New(opts...)
	clock := NewManualClock(time.Unix(0, 0))
	j := &File{
		path:  path,
		eng:   New(append(slices.Clip(opts), WithClock(clock))...),
		clock: clock,
		real:  real,
		f:     f,
	}
	start := time.Now()
	if err := j.load(); err != nil {
		unlockAndClose(f)
		j.eng.Close()
		return nil, err
	}
	j.replayed, j.loaded = j.end, time.Since(start)
	j.synced = j.end // what it read is what the file holds
	return j, nil
}

// Size returns the journal's length in bytes: what the next Open replays.
func (j *File) Size() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.end
}

// Loaded returns how many bytes of journal Open replayed, and how long that
// took (reading, checking and applying them).
func (j *File) Loaded() (int64, time.Duration) {
	return j.replayed, j.loaded
}

// Refuse makes the File turn away every create request with an error
// wrapping ErrRefused and why (which says why; its Unavailable method
// reports true), until Refuse(nil). Reads go on. A request being written
// when Refuse is called completes.
func (j *File) Refuse(why error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.refused = why
}

// Path returns the journal's path.
func (j *File) Path() string { return j.path }

// Recovered returns what Open cut off the journal's tail, or nil if it was
// intact.
func (j *File) Recovered() *Recovery { return j.recovered }

// Records returns how many create requests the journal holds.
func (j *File) Records() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.records
}

// Syncs returns how many fsyncs of its records this File made since Open:
// fewer than the create requests it took when they came at once (see
// File).
func (j *File) Syncs() int {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	return j.syncs
}

// Stats returns the engine's counters (see Engine.Stats). Requests replayed
// by Open are counted.
func (j *File) Stats() Stats { return j.eng.Stats() }

// Now returns the current cluster time: the real clock's time, never before
// a timestamp already issued. Package ledger reads it to tell how long ago a
// cluster timestamp was.
func (j *File) Now() time.Time {
	now, last := j.real.Now(), j.eng.Now()
	if now.Before(last) {
		return last
	}
	return now
}

// InProcess reports that calls never wait for a network (they wait for the
// disk on create requests). Package ledger uses it to batch concurrent calls
// itself, which also batches their fsyncs.
func (j *File) InProcess() bool { return true }

// Close makes what is written durable, closes the engine and the journal
// and releases its lock: every later call returns tb.ErrClientClosed.
// Calling it again does nothing.
func (j *File) Close() {
	j.syncMu.Lock() // an fsync under way ends first
	defer j.syncMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return
	}
	j.closed = true
	j.eng.Close()
	if j.failed == nil && j.synced < j.end {
		_ = j.f.Sync() // what CreateAccountsDeferred left (best effort: nothing waits for it)
	}
	unlockAndClose(j.f)
}

// unlockAndClose releases the journal's lock, then closes f. Closing alone
// would not release it while any other descriptor of the same open file
// lives on: a child that another goroutine forks copies every descriptor
// and holds it until it execs, and a flock belongs to the open file.
func unlockAndClose(f *os.File) {
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}

// load reads the header, creating it in an empty file, and replays the
// records.
func (j *File) load() error {
	st, err := j.f.Stat()
	if err != nil {
		return fmt.Errorf("embedded: journal: %w", err)
	}
	size := st.Size()
	head := make([]byte, min(size, fileHeaderSize))
	if _, err := j.f.ReadAt(head, 0); err != nil {
		return fmt.Errorf("embedded: read journal: %w", err)
	}
	want := fileHeader()
	if size < fileHeaderSize || !bytes.Equal(head, want) {
		// A file whose header is not intact holds no acknowledged request
		// (the header is fsynced before any record is written): if it is
		// empty, or all it holds is a prefix of the header or zeros, it
		// is a journal whose creation was cut short. Anything else is not
		// ours and is left alone.
		rest, err := j.readAll(size)
		if err != nil {
			return err
		}
		if size > int64(len(rest)) || !bytes.HasPrefix(want, rest) && !allZero(rest) {
			if size >= fileHeaderSize && bytes.Equal(head[:len(fileMagic)], want[:len(fileMagic)]) {
				return fmt.Errorf("%w: %s: unsupported header (format version %d, or a damaged header at offset 0); this program reads version %d",
					ErrCorrupt, j.path, binary.LittleEndian.Uint32(head[16:]), fileVersion)
			}
			return fmt.Errorf("%w: %s is not a tblimit journal (it does not start with %q); refusing to use it", ErrCorrupt, j.path, fileMagic[:len(fileMagic)-1])
		}
		if size > 0 {
			j.recovered = &Recovery{Path: j.path, Offset: 0, Dropped: size, Reason: "incomplete file header"}
		}
		return j.create()
	}
	j.end = fileHeaderSize
	return j.replay(size)
}

func (j *File) readAll(size int64) ([]byte, error) {
	if size > 1<<20 {
		size = 1 << 20 // enough to tell: a larger file is not a journal cut short
	}
	b := make([]byte, size)
	if _, err := j.f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("embedded: read journal: %w", err)
	}
	return b, nil
}

// create writes the header of a new journal and makes it durable, with its
// directory entry.
func (j *File) create() error {
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("embedded: journal: %w", err)
	}
	if _, err := j.f.WriteAt(fileHeader(), 0); err != nil {
		return fmt.Errorf("embedded: journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("embedded: journal: %w", err)
	}
	if d, err := os.Open(filepath.Dir(j.path)); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("embedded: journal directory: %w", err)
		}
	}
	j.end = fileHeaderSize
	return nil
}

func fileHeader() []byte {
	h := make([]byte, fileHeaderSize)
	copy(h, fileMagic)
	binary.LittleEndian.PutUint32(h[16:], fileVersion)
	binary.LittleEndian.PutUint32(h[20:], crc32.Checksum(h[:20], castagnoli))
	return h
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// replay applies every record from j.end to size, then cuts a torn tail or
// refuses a corrupt journal.
func (j *File) replay(size int64) error {
	r := bufio.NewReaderSize(io.NewSectionReader(j.f, j.end, size-j.end), 1<<20)
	var head [recordHeaderSize]byte
	var payload []byte
	var accounts []tb.Account
	var transfers []tb.Transfer
	for j.end < size {
		off := j.end
		if n, err := io.ReadFull(r, head[:]); err != nil {
			return j.damaged(off, size, fmt.Sprintf("incomplete record header: %d of %d bytes", n, recordHeaderSize))
		}
		rec, why := parseRecordHeader(head[:])
		if why != "" {
			return j.damaged(off, size, why)
		}
		payload = slices.Grow(payload[:0], int(rec.length))[:rec.length]
		if n, err := io.ReadFull(r, payload); err != nil {
			return j.damaged(off, size, fmt.Sprintf("incomplete record: %d of %d payload bytes", n, rec.length))
		}
		if recordCRC(head[:], payload) != rec.crc {
			return j.damaged(off, size, "checksum mismatch")
		}
		if last := uint64(j.eng.Now().UnixNano()); rec.time <= last {
			return fmt.Errorf("%w: %s: record at offset %d is stamped %d, not after %d: the journal is out of order; refusing to open it",
				ErrCorrupt, j.path, off, rec.time, last)
		}
		j.clock.Set(time.Unix(0, int64(rec.time)))
		n := int(rec.length / eventSize)
		var err error
		switch rec.op {
		case opAccounts:
			accounts = slices.Grow(accounts[:0], n)[:n]
			for i := range accounts {
				decodeAccount(payload[i*eventSize:], &accounts[i])
			}
			_, err = j.eng.CreateAccounts(accounts)
		case opTransfers:
			transfers = slices.Grow(transfers[:0], n)[:n]
			for i := range transfers {
				decodeTransfer(payload[i*eventSize:], &transfers[i])
			}
			_, err = j.eng.CreateTransfers(transfers)
		}
		if err != nil {
			return fmt.Errorf("embedded: %s: replaying the record at offset %d: %w", j.path, off, err)
		}
		j.end += recordHeaderSize + int64(rec.length)
		j.records++
	}
	return nil
}

type recordHeader struct {
	op     byte
	time   uint64
	length uint32
	crc    uint32
}

// parseRecordHeader decodes a record header, or says what is wrong with it.
func parseRecordHeader(b []byte) (recordHeader, string) {
	h := recordHeader{
		op:     b[4],
		time:   binary.LittleEndian.Uint64(b[8:]),
		length: binary.LittleEndian.Uint32(b[16:]),
		crc:    binary.LittleEndian.Uint32(b[20:]),
	}
	switch {
	case binary.LittleEndian.Uint32(b) != recordMagic:
		return h, "bad record magic"
	case h.op != opAccounts && h.op != opTransfers || b[5] != 0 || b[6] != 0 || b[7] != 0:
		return h, fmt.Sprintf("bad operation %d", h.op)
	case h.length == 0 || h.length%eventSize != 0 || h.length > journalBatchMax*eventSize:
		return h, fmt.Sprintf("bad payload length %d", h.length)
	}
	return h, ""
}

func recordCRC(head, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, head[:20])
	return crc32.Update(c, castagnoli, payload)
}

// damaged handles a bad record at off: if an intact record follows it, the
// journal is corrupt; if not, the rest is a torn tail and is cut off.
func (j *File) damaged(off, size int64, why string) error {
	if next, ok, err := j.findRecord(off+1, size); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%w: %s: the record at offset %d is damaged (%s), yet an intact record follows at offset %d: "+
			"this is not a torn write; refusing to open the journal (restore it from a backup, or truncate it to %d bytes to keep only what precedes the damage)",
			ErrCorrupt, j.path, off, why, next, off)
	}
	if err := j.f.Truncate(off); err != nil {
		return fmt.Errorf("embedded: %s: cutting the torn tail at offset %d: %w", j.path, off, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("embedded: %s: cutting the torn tail at offset %d: %w", j.path, off, err)
	}
	j.recovered = &Recovery{Path: j.path, Offset: off, Dropped: size - off, Reason: why}
	return nil
}

// findRecord looks for an intact record starting anywhere in [from, size).
func (j *File) findRecord(from, size int64) (int64, bool, error) {
	const window = 1 << 20
	var magic [4]byte
	binary.LittleEndian.PutUint32(magic[:], recordMagic)
	buf := make([]byte, window+3)
	var head [recordHeaderSize]byte
	for pos := from; pos < size; pos += window {
		n, err := j.f.ReadAt(buf[:min(int64(len(buf)), size-pos)], pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, false, fmt.Errorf("embedded: read journal: %w", err)
		}
		chunk := buf[:n]
		for i := 0; i < min(n, window); {
			k := bytes.Index(chunk[i:], magic[:])
			if k < 0 || i+k >= window {
				break
			}
			at := pos + int64(i+k)
			i += k + 1
			if at+recordHeaderSize > size {
				continue
			}
			if _, err := j.f.ReadAt(head[:], at); err != nil {
				continue
			}
			rec, why := parseRecordHeader(head[:])
			if why != "" || at+recordHeaderSize+int64(rec.length) > size {
				continue
			}
			payload := make([]byte, rec.length)
			if _, err := j.f.ReadAt(payload, at+recordHeaderSize); err != nil {
				continue
			}
			if recordCRC(head[:], payload) == rec.crc {
				return at, true, nil
			}
		}
	}
	return 0, false, nil
}

// stamp returns the time of a create request of n events: the real clock's
// time, but after every timestamp the engine has issued, so that the engine
// stamps the request at exactly this time now and on replay. A time that
// leaves no room for the request's timestamps is refused before anything is
// written, as the engine would refuse it.
func (j *File) stamp(n int) (uint64, error) {
	now := unixNanos(j.real.Now())
	last := unixNanos(j.eng.Now())
	t := max(now, last+1)
	if t > timestampMax-uint64(n) {
		return 0, ErrClockOutOfRange
	}
	return t, nil
}

// tick sets the engine's clock to the real clock's time for a read.
func (j *File) tick() error {
	if j.closed {
		return tb.ErrClientClosed
	}
	j.clock.Set(j.real.Now())
	return nil
}

// begin checks that a create request of n events may be written.
func (j *File) begin(n int) error {
	switch {
	case j.closed:
		return tb.ErrClientClosed
	case n > journalBatchMax:
		return tb.ErrTooMuchData
	case j.failed != nil:
		return j.failed
	case j.refused != nil && n > 0:
		return &refusal{j.refused}
	}
	return nil
}

// append writes one record (made durable by syncTo). On failure the File
// refuses later writes. j.mu is held.
func (j *File) append(op byte, t uint64, n int, encode func(payload []byte)) error {
	size := recordHeaderSize + n*eventSize
	j.buf = slices.Grow(j.buf[:0], size)[:size]
	b := j.buf
	binary.LittleEndian.PutUint32(b[0:], recordMagic)
	b[4], b[5], b[6], b[7] = op, 0, 0, 0
	binary.LittleEndian.PutUint64(b[8:], t)
	binary.LittleEndian.PutUint32(b[16:], uint32(n*eventSize))
	encode(b[recordHeaderSize:])
	binary.LittleEndian.PutUint32(b[20:], recordCRC(b[:recordHeaderSize], b[recordHeaderSize:]))
	if _, err := j.f.WriteAt(b, j.end); err != nil {
		_ = j.f.Truncate(j.end) // best effort: Open cuts a torn tail anyway
		return j.fail(err)
	}
	j.end += int64(size)
	j.records++
	return nil
}

// fail makes the File refuse later writes: after a failed write or fsync
// the file's contents are not known. j.mu is held.
func (j *File) fail(err error) error {
	j.failed = fmt.Errorf("%w: %s: %w (close and open the journal again)", ErrJournalFailed, j.path, err)
	return j.failed
}

// syncTo returns when the journal is durable up to offset end: at once if
// an fsync that began after it was written has returned, else after an
// fsync of its own, which makes every record written so far durable (a
// group commit). j.mu is not held.
func (j *File) syncTo(end int64) error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.synced >= end {
		return nil
	}
	j.mu.Lock()
	target, failed, f := j.end, j.failed, j.f
	j.mu.Unlock()
	if failed != nil {
		return failed
	}
	if err := f.Sync(); err != nil {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.fail(err)
	}
	j.synced = target
	j.syncs++
	return nil
}

// CreateAccounts records the request in the journal, then creates the
// accounts, with one result per account in order. It returns once the
// request is durable.
func (j *File) CreateAccounts(accounts []tb.Account) ([]tb.CreateAccountResult, error) {
	res, end, err := j.createAccounts(accounts)
	if err != nil {
		return nil, err
	}
	if err := j.syncTo(end); err != nil {
		return nil, err
	}
	return res, nil
}

// CreateAccountsDeferred is CreateAccounts that returns before the request
// is durable: it is written and applied, and made durable by the fsync of
// the next create request that returns (or by Close). A crash before then
// loses it, with every request after it, none of which has returned.
// Package ledger sends a batch's new users so, ahead of the batch's create
// transfers, which follow at once: one fsync for both.
func (j *File) CreateAccountsDeferred(accounts []tb.Account) ([]tb.CreateAccountResult, error) {
	res, _, err := j.createAccounts(accounts)
	return res, err
}

func (j *File) createAccounts(accounts []tb.Account) ([]tb.CreateAccountResult, int64, error) {
	return record(j, opAccounts, accounts, encodeAccount, j.eng.CreateAccounts)
}

// CreateTransfers records the request in the journal, then creates the
// transfers, with one result per transfer in order. It returns once the
// request is durable.
func (j *File) CreateTransfers(transfers []tb.Transfer) ([]tb.CreateTransferResult, error) {
	res, end, err := j.createTransfers(transfers)
	if err != nil {
		return nil, err
	}
	if err := j.syncTo(end); err != nil {
		return nil, err
	}
	return res, nil
}

func (j *File) createTransfers(transfers []tb.Transfer) ([]tb.CreateTransferResult, int64, error) {
	return record(j, opTransfers, transfers, encodeTransfer, j.eng.CreateTransfers)
}

// record writes a create request of events as record op, then applies it
// with apply, and returns its results and the offset its record ends at,
// for syncTo (0 for an empty request, which writes nothing).
func record[E, R any](j *File, op byte, events []E, encode func([]byte, *E), apply func([]E) ([]R, error)) ([]R, int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.begin(len(events)); err != nil {
		return nil, 0, err
	}
	if len(events) == 0 {
		j.clock.Set(j.real.Now())
		res, err := apply(events)
		return res, 0, err
	}
	t, err := j.stamp(len(events))
	if err != nil {
		return nil, 0, err
	}
	err = j.append(op, t, len(events), func(p []byte) {
		for i := range events {
			encode(p[i*eventSize:], &events[i])
		}
	})
	if err != nil {
		return nil, 0, err
	}
	j.clock.Set(time.Unix(0, int64(t)))
	res, err := apply(events)
	return res, j.end, err
}

// LookupAccounts is Engine.LookupAccounts at the real clock's time.
func (j *File) LookupAccounts(ids []tb.Uint128) ([]tb.Account, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.tick(); err != nil {
		return nil, err
	}
	return j.eng.LookupAccounts(ids)
}

// LookupTransfers is Engine.LookupTransfers at the real clock's time.
func (j *File) LookupTransfers(ids []tb.Uint128) ([]tb.Transfer, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.tick(); err != nil {
		return nil, err
	}
	return j.eng.LookupTransfers(ids)
}

// GetAccountTransfers is Engine.GetAccountTransfers at the real clock's time.
func (j *File) GetAccountTransfers(filter tb.AccountFilter) ([]tb.Transfer, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.tick(); err != nil {
		return nil, err
	}
	return j.eng.GetAccountTransfers(filter)
}

// GetAccountBalances is Engine.GetAccountBalances at the real clock's time.
func (j *File) GetAccountBalances(filter tb.AccountFilter) ([]tb.AccountBalance, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.tick(); err != nil {
		return nil, err
	}
	return j.eng.GetAccountBalances(filter)
}

// QueryAccounts is Engine.QueryAccounts at the real clock's time.
func (j *File) QueryAccounts(filter tb.QueryFilter) ([]tb.Account, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.tick(); err != nil {
		return nil, err
	}
	return j.eng.QueryAccounts(filter)
}

// QueryTransfers is Engine.QueryTransfers at the real clock's time.
func (j *File) QueryTransfers(filter tb.QueryFilter) ([]tb.Transfer, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.tick(); err != nil {
		return nil, err
	}
	return j.eng.QueryTransfers(filter)
}

// GetChangeEvents is Engine.GetChangeEvents at the real clock's time.
func (j *File) GetChangeEvents(filter tb.ChangeEventsFilter) ([]tb.ChangeEvent, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.tick(); err != nil {
		return nil, err
	}
	return j.eng.GetChangeEvents(filter)
}

// Nop does nothing; it fails only once the File is closed.
func (j *File) Nop() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return tb.ErrClientClosed
	}
	return nil
}

// The events' binary layout: TigerBeetle's, little-endian, 128 bytes.

func putU128(b []byte, v tb.Uint128) {
	x := v.Bytes()
	copy(b[:16], x[:])
}

func getU128(b []byte) tb.Uint128 { return tb.BytesToUint128([16]byte(b[:16])) }

func encodeAccount(b []byte, a *tb.Account) {
	putU128(b[0:], a.ID)
	putU128(b[16:], a.DebitsPending)
	putU128(b[32:], a.DebitsPosted)
	putU128(b[48:], a.CreditsPending)
	putU128(b[64:], a.CreditsPosted)
	putU128(b[80:], a.UserData128)
	binary.LittleEndian.PutUint64(b[96:], a.UserData64)
	binary.LittleEndian.PutUint32(b[104:], a.UserData32)
	binary.LittleEndian.PutUint32(b[108:], a.Reserved)
	binary.LittleEndian.PutUint32(b[112:], a.Ledger)
	binary.LittleEndian.PutUint16(b[116:], a.Code)
	binary.LittleEndian.PutUint16(b[118:], a.Flags)
	binary.LittleEndian.PutUint64(b[120:], a.Timestamp)
}

func decodeAccount(b []byte, a *tb.Account) {
	*a = tb.Account{
		ID:             getU128(b[0:]),
		DebitsPending:  getU128(b[16:]),
		DebitsPosted:   getU128(b[32:]),
		CreditsPending: getU128(b[48:]),
		CreditsPosted:  getU128(b[64:]),
		UserData128:    getU128(b[80:]),
		UserData64:     binary.LittleEndian.Uint64(b[96:]),
		UserData32:     binary.LittleEndian.Uint32(b[104:]),
		Reserved:       binary.LittleEndian.Uint32(b[108:]),
		Ledger:         binary.LittleEndian.Uint32(b[112:]),
		Code:           binary.LittleEndian.Uint16(b[116:]),
		Flags:          binary.LittleEndian.Uint16(b[118:]),
		Timestamp:      binary.LittleEndian.Uint64(b[120:]),
	}
}

func encodeTransfer(b []byte, t *tb.Transfer) {
	putU128(b[0:], t.ID)
	putU128(b[16:], t.DebitAccountID)
	putU128(b[32:], t.CreditAccountID)
	putU128(b[48:], t.Amount)
	putU128(b[64:], t.PendingID)
	putU128(b[80:], t.UserData128)
	binary.LittleEndian.PutUint64(b[96:], t.UserData64)
	binary.LittleEndian.PutUint32(b[104:], t.UserData32)
	binary.LittleEndian.PutUint32(b[108:], t.Timeout)
	binary.LittleEndian.PutUint32(b[112:], t.Ledger)
	binary.LittleEndian.PutUint16(b[116:], t.Code)
	binary.LittleEndian.PutUint16(b[118:], t.Flags)
	binary.LittleEndian.PutUint64(b[120:], t.Timestamp)
}

func decodeTransfer(b []byte, t *tb.Transfer) {
	*t = tb.Transfer{
		ID:              getU128(b[0:]),
		DebitAccountID:  getU128(b[16:]),
		CreditAccountID: getU128(b[32:]),
		Amount:          getU128(b[48:]),
		PendingID:       getU128(b[64:]),
		UserData128:     getU128(b[80:]),
		UserData64:      binary.LittleEndian.Uint64(b[96:]),
		UserData32:      binary.LittleEndian.Uint32(b[104:]),
		Timeout:         binary.LittleEndian.Uint32(b[108:]),
		Ledger:          binary.LittleEndian.Uint32(b[112:]),
		Code:            binary.LittleEndian.Uint16(b[116:]),
		Flags:           binary.LittleEndian.Uint16(b[118:]),
		Timestamp:       binary.LittleEndian.Uint64(b[120:]),
	}
}
