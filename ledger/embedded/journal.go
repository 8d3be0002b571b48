//go:build unix

package embedded

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
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

// File is an embedded engine kept on disk, so that its state outlives the
// process: provisioning in one process and acquiring in the next works, and
// every acknowledged request survives a crash or kill -9 at any moment. It
// implements tb.Client like Engine; create one with Open and Close it when
// done. A File is safe for concurrent use; requests are applied one at a
// time.
//
// A File is two things on disk: its journal, the file at the path given to
// Open, which every create request is written to before it is answered
// (a write-ahead log), and its store, the directory beside it named by
// StorePath, a Pebble database that holds the state (accounts, transfers,
// the indexes the queries need, pending transfers and their expiry; see
// store.go). Memory holds an index from account ID to account (11 to 21
// bytes a key), the pending transfers' expiry queues, what changed since
// the last checkpoint and a cache of the rest, accounts included
// (WithCacheSize): it grows with the keys, by little, not with the
// decisions.
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
// # Checkpoints
//
// Once the journal holds 3 MiB of records, and at Close, a checkpoint
// writes everything that changed since the last one to the store in one
// atomic, fsynced batch, with the time of the last request it includes;
// then the journal starts again after its header, its next records
// written over the space the last ones took (an fsync of records written
// within the file's space costs about half of one that grows the file,
// which must make the file's new size durable too). Open loads the store
// (the account IDs and the expiry queues, not the accounts nor the
// transfers) and replays only the journal's requests after that time: a
// start takes time in proportion to the keys, not to the history. A crash
// between a checkpoint and the cut leaves requests in the journal that the
// store holds: Open skips them by their time. A journal written before stores
// (no store beside it) is applied to a new store on its first Open, once,
// with checkpoints along the way so that memory stays bounded
// (WithProgress reports how far).
//
// # Format
//
// All integers are little-endian. The file starts with a 24-byte header:
//
//	 0  [16]byte  "tblimit journal\n"
//	16  uint32    format version: 1, 2 or 3
//	20  uint32    CRC32C (Castagnoli) of bytes 0..20
//
// Version 1 is a journal that holds every create request since it was
// made, as before stores: a new journal, or one not yet converted. Version
// 2 is a journal cut back after a checkpoint, which holds only the
// requests since; the state before them is in its store. The header turns
// to version 2 (written and fsynced) at the first checkpoint that cuts
// the journal, never after, so that a binary from before stores, which
// reads version 1 only, refuses a cut journal ("unsupported header")
// rather than take it for the whole state. Converting is one way. Open
// refuses, with ErrCorrupt and nothing written, a version 2 journal whose
// store is missing or holds no checkpoint, a store with a checkpoint
// beside a missing or empty journal, and a version 1 journal beside a
// store whose last request it does not hold (an older copy put back; a
// conversion cut short holds it, and Open finishes it). Version 3, which
// this package writes at its first checkpoint (from version 1 or 2), is
// version 2 whose space is written over after each checkpoint: every
// record is written with a record header of zeros after it (the end
// mark), which the next record overwrites, and what lies after the end
// mark is what earlier records left, each stamped no later than the
// store's checkpoint. A binary that reads versions 1 and 2 refuses it.
// The space is given back (the file truncated to its header) at a
// checkpoint that finds it more than twice the checkpoint interval, or
// 4 MiB if more. A new journal (version 1) is made with the space of its
// records until the first checkpoint (the checkpoint interval, at most
// 64 MiB), zeros; in every version a record header of zeros (an end mark)
// ends the records.
//
// The header is followed by one record per create request, back to back:
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
// A damaged journal tail (an incomplete last record, or a last record
// whose checksum fails, with nothing intact after it) is a write that was
// cut short by a crash: its fsync never returned, so it was never
// acknowledged. Open truncates it, keeps the intact prefix and reports it
// (Recovered). A damaged record followed by an intact one is not a torn
// write but corruption: Open refuses the file with an error wrapping
// ErrCorrupt that names the file and the offset, and changes nothing. The
// records end at an end mark; in a version 3 journal also at an intact
// record stamped no later than the one before it (left by earlier
// records, when a crash lost the end mark written after the last one); a
// damaged record is a torn tail unless an intact record stamped after
// every record before it, and after the store's checkpoint, follows it,
// and the records' end is corruption if one follows it. A file that is
// not a journal is refused too, never overwritten. The store
// checks itself: Pebble checksums its log and its blocks, a checkpoint is
// atomic, and a store whose records do not read back as written is refused
// (ErrCorrupt at Open, ErrStore on a later read, after which the File
// refuses create requests).
//
// # Locking
//
// Open takes an exclusive, non-blocking flock on the journal for as long
// as the File is open: a second Open, from this process or another, fails
// at once with an error wrapping ErrBusy. Close releases it; so does the
// death of the process. The store is used only under that lock.
//
// # Cost
//
// A create request costs one write and a share of one fsync (from a tenth
// of a millisecond to a few milliseconds, by disk), whatever its size:
// batch events. Concurrent requests share their fsyncs, and package
// ledger's pipeline sends the accounts of a batch's new users without
// waiting for theirs (CreateAccountsDeferred): the batch's create, which
// follows at once, makes both durable with one. The request that crosses
// the checkpoint threshold also waits for the checkpoint (tens of
// milliseconds), holding up the requests behind it. A transfer older than
// the last checkpoint that is not in the cache is read back from the store
// when used (a lookup, a retry of its ID, the post or void of an old
// pending transfer, a query); a new transfer ID is looked up in the
// store's index (a Bloom filter answers most). On disk, a decision costs
// its journal record until the next checkpoint, then about 200 bytes in
// the store.
//
// File is available on Unix systems (it needs flock).
type File struct {
	path    string
	version uint32 // the journal's format version (see Format)
	eng     *Engine
	clock   *ManualClock // the engine's clock, moved by the File
	real    Clock        // the time requests are stamped with

	mu        sync.Mutex
	f         *os.File
	end       int64 // the offset just after the last record written
	size      int64 // the file's size (at least end; see versionReused)
	buf       []byte
	failed    error
	closed    bool
	records   int
	recovered *Recovery
	refused   error // see Refuse

	// Open replayed the journal's first replayed bytes in loaded.
	replayed int64
	loaded   time.Duration

	st        *store
	lastTime  uint64 // the time of the last record applied
	ckptBytes int64  // journal bytes between checkpoints
	progress  func(done, total int64)
	keep      bool // never checkpoint (tests)

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
	fileHeaderSize = 24

	// versionAlone is the format version of a journal that holds every
	// create request since its creation: no store holds any of its state.
	// A binary from before stores reads it.
	versionAlone = 1
	// versionStored is the format version of a journal cut back after a
	// checkpoint, as the first binaries with a store wrote it: its store
	// holds the state up to the checkpoint. A binary from before stores,
	// which reads version 1 only, refuses it rather than take the cut
	// journal for the whole state. This package reads it, and turns it to
	// versionReused at its next checkpoint.
	versionStored = 2
	// versionReused is the format version of a journal that, after a
	// checkpoint, writes its next records over the space its last ones
	// took rather than cut it back: its records end at a zero record
	// header or at the end of the file, and what follows them is what
	// earlier records left (see Format). A binary that reads versions 1
	// and 2 refuses it rather than take those leftovers for damage.
	versionReused = 3

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
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(StorePath(path)); err == nil {
			return nil, fmt.Errorf("%w: %s holds a store but its journal %s is missing: the store and its journal go together; refusing to start a new journal beside it (put the journal back, or move the store away to start empty)",
				ErrCorrupt, StorePath(path), path)
		}
	}
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
		path:      path,
		eng:       New(append(slices.Clip(opts), WithClock(clock))...),
		clock:     clock,
		real:      real,
		f:         f,
		ckptBytes: max(cmp.Or(real.ckptBytes, checkpointBytes), 1), // below 1: after every request, as 1
		progress:  real.progress,
		keep:      real.noCheckpoints,
	}
	if j.keep {
		j.ckptBytes = math.MaxInt64
	}
	start := time.Now()
	err = j.load(cmp.Or(real.cacheSize, defaultCacheSize))
	if err == nil {
		j.replayed, j.loaded = j.end, time.Since(start)
		j.synced = j.end // what it read is what the file holds
		if j.end > fileHeaderSize && !j.keep {
			// Next time, start from the store alone.
			j.syncMu.Lock()
			j.mu.Lock()
			err = j.checkpoint(true)
			j.mu.Unlock()
			j.syncMu.Unlock()
		}
	}
	if err == nil && j.st != nil {
		err = j.st.readFar()
	}
	if err != nil {
		if j.st != nil {
			j.st.close()
		}
		unlockAndClose(f)
		j.eng.Close()
		return nil, err
	}
	return j, nil
}

// StorePath returns the directory of the store of the journal at path.
func StorePath(path string) string { return path + ".store" }

const (
	// checkpointBytes is how much journal a File writes between two
	// checkpoints of its store: what a start after a crash replays. It
	// keeps the checkpoint's batch, about 2.2 times as large, under half
	// of Pebble's memtable (see store.checkpointBatch).
	checkpointBytes = 3 << 20
	// defaultCacheSize is the default of WithCacheSize.
	defaultCacheSize = 64 << 20
)

// openStore opens the journal's store, creating it unless the journal's
// version says it exists, and loads the state it holds; found reports
// that it held a checkpoint.
func (j *File) openStore(cache int64) (found bool, err error) {
	dir := StorePath(j.path)
	if j.version != versionAlone {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("%w: %s holds only the requests since its last checkpoint, and the state before them is in its store %s, which is missing; refusing to open the journal alone (put the store back beside it)",
				ErrCorrupt, j.path, dir)
		}
	}
	st, err := openStore(dir, cache, j.version != versionAlone)
	if err != nil {
		return false, err
	}
	j.st = st
	t, found, err := j.eng.attach(st)
	if err != nil {
		return false, fmt.Errorf("%s: %w", dir, err)
	}
	if j.version != versionAlone && !found {
		return false, fmt.Errorf("%w: %s holds only the requests since its last checkpoint, and its store %s holds no checkpoint; refusing to open them",
			ErrCorrupt, j.path, dir)
	}
	j.lastTime = t
	return found, nil
}

// checkpoint writes what changed since the last checkpoint to the store;
// with cut, the journal, all of whose records the store then holds,
// starts again after its header, over the same space. j.syncMu and j.mu
// are held.
func (j *File) checkpoint(cut bool) (err error) {
	if j.failed != nil {
		return j.failed
	}
	defer j.guard(&err)
	if err := j.eng.checkpointAt(j.lastTime); err != nil {
		return j.fail(err)
	}
	if !cut {
		return nil
	}
	if j.version != versionReused {
		// The new version is durable before a record is lost or written
		// over: a binary that reads version 1 never sees a cut journal,
		// nor one that reads versions 1 and 2 the leftovers of records.
		if _, err := j.f.WriteAt(fileHeader(versionReused), 0); err != nil {
			return j.fail(err)
		}
		if err := j.f.Sync(); err != nil {
			return j.fail(err)
		}
		j.version = versionReused
	}
	// The next records go over the space the last ones took, which the
	// file already holds: an fsync then writes no metadata, and costs
	// about half of one that grows the file (measured on this project's
	// machines). A journal grown far past what a checkpoint leaves (a
	// conversion, or a larger checkpoint interval before) gives its space
	// back first.
	if (j.size-fileHeaderSize)/2 > max(j.ckptBytes, reuseMin) {
		if err := j.f.Truncate(fileHeaderSize); err != nil {
			return j.fail(err)
		}
		j.size = fileHeaderSize
	}
	// No fsync: the records the end mark hides are in the store, stamped
	// no later than its checkpoint, and Open skips them if the mark is
	// lost; the next record's fsync makes both durable.
	if _, err := j.f.WriteAt(endMark[:], fileHeaderSize); err != nil {
		return j.fail(err)
	}
	j.size = max(j.size, fileHeaderSize+recordHeaderSize)
	j.end, j.synced, j.records = fileHeaderSize, fileHeaderSize, 0
	return nil
}

// endMark ends the records of a version 3 journal: a record header of
// zeros, written after every record (see Format).
var endMark [recordHeaderSize]byte

// reuseMin is the least space a journal keeps to write over after a
// checkpoint, whatever its checkpoint interval: the largest record fits.
const reuseMin = 2 << 20

// maybeCheckpoint checkpoints once the journal has grown past
// ckptBytes. A failure fails the File (see ErrJournalFailed), not the
// request that returns, which is durable already.
func (j *File) maybeCheckpoint() {
	j.mu.Lock()
	due := j.end-fileHeaderSize >= j.ckptBytes && !j.closed
	j.mu.Unlock()
	if !due {
		return
	}
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.end-fileHeaderSize >= j.ckptBytes && !j.closed {
		_ = j.checkpoint(true)
	}
}

// guard turns a failure to read the store, raised inside the engine, into
// the File's failure. j.mu is held.
func (j *File) guard(err *error) {
	if r := recover(); r != nil {
		f, ok := r.(storeFault)
		if !ok {
			panic(r)
		}
		*err = j.fail(f.err)
	}
}

// Size returns the length in bytes of the journal's header and records:
// what the next Open replays. The file may be larger: space that earlier
// records took, which the next ones write over.
func (j *File) Size() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.end
}

// Loaded returns how many bytes of journal Open read, and how long Open
// took (loading the store, reading, checking and applying the journal's
// records after its last checkpoint).
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

// Records returns how many create requests the journal holds: those since
// the last checkpoint.
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

// Close checkpoints what the journal holds into the store (so that the next
// Open replays nothing), closes the engine, the store and the journal and
// releases its lock: every later call returns tb.ErrClientClosed.
// Calling it again does nothing.
func (j *File) Close() {
	j.syncMu.Lock() // an fsync under way ends first
	defer j.syncMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return
	}
	if j.failed == nil && j.end > fileHeaderSize && !j.keep {
		// Best effort (nothing waits for it): the journal holds the requests.
		_ = j.checkpoint(true)
	}
	if j.failed == nil && j.synced < j.end {
		_ = j.f.Sync() // what CreateAccountsDeferred left (best effort: nothing waits for it)
	}
	j.closed = true
	j.eng.Close()
	if j.st != nil {
		j.st.close()
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

// load reads the header, creating it in an empty file, opens the store,
// and replays the records it does not hold.
func (j *File) load(cache int64) error {
	st, err := j.f.Stat()
	if err != nil {
		return fmt.Errorf("embedded: journal: %w", err)
	}
	size := st.Size()
	head := make([]byte, min(size, fileHeaderSize))
	if _, err := j.f.ReadAt(head, 0); err != nil {
		return fmt.Errorf("embedded: read journal: %w", err)
	}
	if v, ok := headerVersion(head); ok {
		j.version, j.end, j.size = v, fileHeaderSize, size
		if _, err := j.openStore(cache); err != nil {
			return err
		}
		return j.replay(size)
	}
	// A file whose header is not intact holds no acknowledged request (the
	// header is fsynced before any record is written): if it is empty, or
	// all it holds is a prefix of the header or zeros, it is a journal
	// whose creation was cut short. Anything else is not ours and is left
	// alone.
	rest, err := j.readAll(size)
	if err != nil {
		return err
	}
	want := fileHeader(versionAlone)
	if size > int64(len(rest)) || !bytes.HasPrefix(want, rest) && !allZero(rest) {
		if size >= fileHeaderSize && bytes.Equal(head[:len(fileMagic)], want[:len(fileMagic)]) {
			return fmt.Errorf("%w: %s: unsupported header (format version %d, or a damaged header at offset 0); this program reads versions %d to %d",
				ErrCorrupt, j.path, binary.LittleEndian.Uint32(head[16:]), versionAlone, versionReused)
		}
		return fmt.Errorf("%w: %s is not a tblimit journal (it does not start with %q); refusing to use it", ErrCorrupt, j.path, fileMagic[:len(fileMagic)-1])
	}
	// A new journal: version 1 until its first checkpoint (see Format).
	j.version = versionAlone
	found, err := j.openStore(cache)
	if err != nil {
		return err
	}
	if found {
		return fmt.Errorf("%w: %s holds a checkpoint but its journal %s is empty: the store and its journal go together; refusing to start a new journal beside it (put the journal back, or move the store away to start empty)",
			ErrCorrupt, StorePath(j.path), j.path)
	}
	if size > 0 {
		j.recovered = &Recovery{Path: j.path, Offset: 0, Dropped: size, Reason: "incomplete file header"}
	}
	return j.create()
}

// headerVersion returns the format version of an intact journal header.
func headerVersion(head []byte) (uint32, bool) {
	for _, v := range []uint32{versionAlone, versionStored, versionReused} {
		if bytes.Equal(head, fileHeader(v)) {
			return v, true
		}
	}
	return 0, false
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
	if _, err := j.f.WriteAt(fileHeader(j.version), 0); err != nil {
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
	j.end, j.size = fileHeaderSize, fileHeaderSize
	if j.keep {
		return nil
	}
	// The space of the records until the first checkpoint, written now,
	// so that their fsyncs do not grow the file either. Zeros: each
	// record header of it is an end mark.
	space := fileHeaderSize + min(j.ckptBytes, maxSpace)
	zeros := make([]byte, min(space-j.size, 1<<20))
	for j.size < space {
		n := min(int64(len(zeros)), space-j.size)
		if _, err := j.f.WriteAt(zeros[:n], j.size); err != nil {
			return fmt.Errorf("embedded: journal: %w", err)
		}
		j.size += n
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("embedded: journal: %w", err)
	}
	return nil
}

// maxSpace bounds the space a new journal is given (see create).
const maxSpace = 64 << 20

func fileHeader(version uint32) []byte {
	h := make([]byte, fileHeaderSize)
	copy(h, fileMagic)
	binary.LittleEndian.PutUint32(h[16:], version)
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

// replay applies every record from j.end to size that the store does not
// hold yet, then cuts a torn tail or refuses a corrupt journal.
func (j *File) replay(size int64) (err error) {
	defer j.guard(&err)
	walTime := j.lastTime
	// A version 1 journal beside a store is one whose conversion was cut
	// short: it holds every request, the store's last one among them. One
	// that does not is not the journal the store was made from (an older
	// copy put back, say): the store would add requests it does not hold.
	unmatched := j.version == versionAlone && walTime != 0
	prev, sinceCkpt, reported := uint64(0), int64(0), int64(0)
	r := bufio.NewReaderSize(io.NewSectionReader(j.f, j.end, size-j.end), 1<<20)
	var head [recordHeaderSize]byte
	var payload []byte
	var accounts []tb.Account
	var transfers []tb.Transfer
	// ours reports whether an intact record stamped at t may belong to
	// the journal's records so far: in a version 3 journal, what earlier
	// records left is stamped no later than the last record read, nor
	// than the store's checkpoint (see Format).
	ours := func(t uint64) bool { return j.version != versionReused || t > max(prev, walTime) }
	for j.end < size {
		off := j.end
		if n, err := io.ReadFull(r, head[:]); err != nil {
			return j.damaged(off, size, fmt.Sprintf("incomplete record header: %d of %d bytes", n, recordHeaderSize), ours)
		}
		if head == endMark {
			return j.ended(off, size, "the end mark", ours)
		}
		rec, why := parseRecordHeader(head[:])
		if why != "" {
			return j.damaged(off, size, why, ours)
		}
		payload = slices.Grow(payload[:0], int(rec.length))[:rec.length]
		if n, err := io.ReadFull(r, payload); err != nil {
			return j.damaged(off, size, fmt.Sprintf("incomplete record: %d of %d payload bytes", n, rec.length), ours)
		}
		if recordCRC(head[:], payload) != rec.crc {
			return j.damaged(off, size, "checksum mismatch", ours)
		}
		if rec.time <= prev {
			if j.version == versionReused {
				return j.ended(off, size, fmt.Sprintf("a record stamped %d, left by earlier records", rec.time), ours)
			}
			return fmt.Errorf("%w: %s: record at offset %d is stamped %d, not after %d: the journal is out of order; refusing to open it",
				ErrCorrupt, j.path, off, rec.time, prev)
		}
		prev = rec.time
		j.end += recordHeaderSize + int64(rec.length)
		j.records++
		if rec.time == walTime {
			unmatched = false
		}
		if rec.time <= walTime {
			continue // the store holds it: a checkpoint's cut never happened
		}
		if unmatched {
			return j.unmatched(walTime)
		}
		if last := uint64(j.eng.Now().UnixNano()); rec.time <= last {
			return fmt.Errorf("%w: %s: record at offset %d is stamped %d, not after %d, the store's clock: the journal and the store do not belong together; refusing to open them",
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
		j.lastTime = rec.time
		j.eng.trim()
		if sinceCkpt += recordHeaderSize + int64(rec.length); sinceCkpt >= j.ckptBytes {
			// Memory stays bounded however long the journal.
			if err := j.eng.checkpointAt(j.lastTime); err != nil {
				return err
			}
			sinceCkpt = 0
		}
		if j.progress != nil && j.end-reported >= 1<<20 {
			j.progress(j.end, size)
			reported = j.end
		}
	}
	if j.progress != nil && reported > 0 {
		j.progress(j.end, size)
	}
	if unmatched {
		return j.unmatched(walTime)
	}
	return nil
}

// unmatched refuses a version 1 journal that does not hold the last
// request its store holds, stamped walTime.
func (j *File) unmatched(walTime uint64) error {
	return fmt.Errorf("%w: %s (format version 1, every request in it) does not hold the request stamped %d, the last one its store %s holds: they do not belong together (an older copy of the journal put back?); refusing to open them (move the store away to convert the journal anew)",
		ErrCorrupt, j.path, walTime, StorePath(j.path))
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

// damaged handles a bad record at off: if an intact record of the journal
// (ours) follows it, the journal is corrupt; if not, the rest is a torn
// tail and is cut off.
func (j *File) damaged(off, size int64, why string, ours func(uint64) bool) error {
	if err := j.nothingAfter(off, size, fmt.Sprintf("the record at offset %d is damaged (%s)", off, why), ours); err != nil {
		return err
	}
	if err := j.f.Truncate(off); err != nil {
		return fmt.Errorf("embedded: %s: cutting the torn tail at offset %d: %w", j.path, off, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("embedded: %s: cutting the torn tail at offset %d: %w", j.path, off, err)
	}
	j.size = off
	j.recovered = &Recovery{Path: j.path, Offset: off, Dropped: size - off, Reason: why}
	return nil
}

// ended handles the end of a journal's records at off (the end mark, or,
// in version 3, a record that earlier records left; what): it is corrupt
// if an intact record of its own (ours) follows; if not, what follows is
// space to write over, and is kept.
func (j *File) ended(off, size int64, what string, ours func(uint64) bool) error {
	return j.nothingAfter(off, size, fmt.Sprintf("the journal's records end at offset %d (%s)", off, what), ours)
}

// nothingAfter refuses the journal, whose records stop at off (as stop
// says), if an intact record of its own (ours) follows: that is not a
// torn write but damage.
func (j *File) nothingAfter(off, size int64, stop string, ours func(uint64) bool) error {
	next, ok, err := j.findRecord(off+1, size, ours)
	if err != nil || !ok {
		return err
	}
	return fmt.Errorf("%w: %s: %s, yet an intact record follows at offset %d: "+
		"this is not a torn write; refusing to open the journal (restore it from a backup, or truncate it to %d bytes to keep only what precedes offset %d)",
		ErrCorrupt, j.path, stop, next, off, off)
}

// findRecord looks for an intact record starting anywhere in [from, size)
// whose stamp ours accepts.
func (j *File) findRecord(from, size int64, ours func(uint64) bool) (int64, bool, error) {
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
			if recordCRC(head[:], payload) == rec.crc && ours(rec.time) {
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

// read runs a read request f at the real clock's time.
func (j *File) read(f func() error) (err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	defer j.guard(&err)
	if err := j.tick(); err != nil {
		return err
	}
	defer j.eng.trim()
	return f()
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
	mark := 0
	if j.version == versionReused {
		mark = recordHeaderSize // the end mark goes with the record, in one write
	}
	j.buf = slices.Grow(j.buf[:0], size+mark)[:size+mark]
	b := j.buf
	binary.LittleEndian.PutUint32(b[0:], recordMagic)
	b[4], b[5], b[6], b[7] = op, 0, 0, 0
	binary.LittleEndian.PutUint64(b[8:], t)
	binary.LittleEndian.PutUint32(b[16:], uint32(n*eventSize))
	encode(b[recordHeaderSize:size])
	binary.LittleEndian.PutUint32(b[20:], recordCRC(b[:recordHeaderSize], b[recordHeaderSize:size]))
	copy(b[size:], endMark[:])
	if _, err := j.f.WriteAt(b, j.end); err != nil {
		_ = j.f.Truncate(j.end) // best effort: Open cuts a torn tail anyway
		return j.fail(err)
	}
	j.end += int64(size)
	j.size = max(j.size, j.end+int64(mark))
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
	j.maybeCheckpoint()
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
	j.maybeCheckpoint()
	return res, nil
}

func (j *File) createTransfers(transfers []tb.Transfer) ([]tb.CreateTransferResult, int64, error) {
	return record(j, opTransfers, transfers, encodeTransfer, j.eng.CreateTransfers)
}

// record writes a create request of events as record op, then applies it
// with apply, and returns its results and the offset its record ends at,
// for syncTo (0 for an empty request, which writes nothing).
func record[E, R any](j *File, op byte, events []E, encode func([]byte, *E), apply func([]E) ([]R, error)) (res []R, end int64, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	defer j.guard(&err)
	if err := j.begin(len(events)); err != nil {
		return nil, 0, err
	}
	defer j.eng.trim()
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
	j.lastTime = t
	res, err = apply(events)
	return res, j.end, err
}

// LookupAccounts is Engine.LookupAccounts at the real clock's time.
func (j *File) LookupAccounts(ids []tb.Uint128) (out []tb.Account, err error) {
	err = j.read(func() (err error) {
		out, err = j.eng.LookupAccounts(ids)
		return err
	})
	return out, err
}

// LookupTransfers is Engine.LookupTransfers at the real clock's time.
func (j *File) LookupTransfers(ids []tb.Uint128) (out []tb.Transfer, err error) {
	err = j.read(func() (err error) {
		out, err = j.eng.LookupTransfers(ids)
		return err
	})
	return out, err
}

// GetAccountTransfers is Engine.GetAccountTransfers at the real clock's time.
func (j *File) GetAccountTransfers(filter tb.AccountFilter) (out []tb.Transfer, err error) {
	err = j.read(func() (err error) {
		out, err = j.eng.GetAccountTransfers(filter)
		return err
	})
	return out, err
}

// GetAccountBalances is Engine.GetAccountBalances at the real clock's time.
func (j *File) GetAccountBalances(filter tb.AccountFilter) (out []tb.AccountBalance, err error) {
	err = j.read(func() (err error) {
		out, err = j.eng.GetAccountBalances(filter)
		return err
	})
	return out, err
}

// QueryAccounts is Engine.QueryAccounts at the real clock's time.
func (j *File) QueryAccounts(filter tb.QueryFilter) (out []tb.Account, err error) {
	err = j.read(func() (err error) {
		out, err = j.eng.QueryAccounts(filter)
		return err
	})
	return out, err
}

// QueryTransfers is Engine.QueryTransfers at the real clock's time.
func (j *File) QueryTransfers(filter tb.QueryFilter) (out []tb.Transfer, err error) {
	err = j.read(func() (err error) {
		out, err = j.eng.QueryTransfers(filter)
		return err
	})
	return out, err
}

// GetChangeEvents is Engine.GetChangeEvents at the real clock's time.
func (j *File) GetChangeEvents(filter tb.ChangeEventsFilter) (out []tb.ChangeEvent, err error) {
	err = j.read(func() (err error) {
		out, err = j.eng.GetChangeEvents(filter)
		return err
	})
	return out, err
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
