package embedded

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/internal/u128"
)

// The store keeps a state on disk, in a Pebble database, so that memory
// holds what is hot and a start reads no history (see File).
//
// The state machine is the same code with or without a store: the
// structures that grow with every transfer or key (the accounts, the
// transfer arena, the ID sets, the expiry log, the accounts' lists of
// transfers, expiries, checkpoints and balances) hold in memory only what
// changed since the last checkpoint and a bounded cache of the rest, and
// read the rest back from the store when used. What stays in memory is
// what finding a key needs, the index from account ID to account (11 to
// 21 bytes a key) and what tells most new transfer IDs from stored ones
// without a read (storedIDs), and what is hot: the pending transfers'
// expiry queues and the counters.
//
// A checkpoint writes, in one atomic and synced Pebble batch, everything
// that changed since the previous one, and the cluster time of the last
// request it includes: the File's journal, which every request is written
// to and fsynced in first, then holds only the requests after it: its
// records start again after its header, written over the space the last
// ones took (see File). Open loads the account IDs and the queues, and
// applies the journal's requests that came after the checkpoint.
//
// Keys (all integers big-endian, so that keys sort as the numbers do):
//
//	"M"                            the meta record: counters, queues, clock
//	"A" account index              an account: fields, balances, list lengths
//	"N" block                      the IDs of accounts [block*64, +64), as many as exist
//	"T" chunk                      transfers [chunk*1024, +1024): records, IDs, user data 128
//	"E" chunk                      expiry events [chunk*1024, +1024)
//	"I" transfer ID                the transfer's index, or nothing for an ID that
//	                               failed for good (a transient status)
//	"L" account index, kind, start entries [start, ...) of one of the account's lists
//
// Records are the engine's own in-memory layout (little-endian, 64-bit):
// the meta record holds their sizes, and a store written with other
// sizes is refused.
type store struct {
	db *pebble.DB

	budget   int64 // bytes of clean chunks the cache may hold
	resident int64 // bytes of clean chunks cached
	fifo     []cached
	head     int // fifo[head:] are live entries

	inCache map[cached]bool // chunks counted in resident

	dirtyBits []uint64 // accounts changed since the last checkpoint
	dirty     []uint32 // the same, as a list
	loaded    map[uint32][listKinds]uint32

	walTime uint64 // the cluster time of the last request checkpointed

	// batch is the checkpoints' batch, kept from one to the next while
	// Pebble copies them into its memtable (see checkpoint); batchSize is
	// the size of the last one.
	batch     *pebble.Batch
	batchSize int

	// The last ID looked up in the store and what it is: a new transfer's
	// ID is looked up among the transfers, then among the failed IDs, and
	// one read answers both.
	lastID              tb.Uint128
	lastIdx             uint32
	lastFound, lastFail bool

	known storedIDs
}

// cached is a chunk in the cache, in order of arrival.
type cached struct {
	v evictor
	c uint32
}

// evictor is a paged structure: evict drops chunk c from memory if it is
// in memory and clean, and returns how many bytes that freed.
type evictor interface{ evict(c uint32) int64 }

// Key spaces.
const (
	keyMeta      = 'M'
	keyAccount   = 'A'
	keyAcctIDs   = 'N'
	keyTransfers = 'T'
	keyExpired   = 'E'
	keyID        = 'I'
	keyList      = 'L'
)

// The lists an account keeps, as stored.
const (
	listDebits = iota
	listCredits
	listExpired
	listCkpts
	listHistory
	listKinds
)

const (
	storeVersion   = 2
	storeMagic     = "tblimit store\n\x00\x00"
	xferSize       = int(unsafe.Sizeof(xfer{}))
	ckptSize       = int(unsafe.Sizeof(ckpt{}))
	balanceSize    = int(unsafe.Sizeof(balance{}))
	expiredSize    = int(unsafe.Sizeof(expiredEvent{}))
	acctRecordSize = 16*2 + 8*2 + 4*2 + 2*3 + 64 + 4*listKinds
)

// ErrStore wraps a failure to read or write a File's store: the File then
// refuses create requests, as after a failed write of its journal.
var ErrStore = errors.New("embedded: store failed")

// storeFault carries a store read error out of the state machine, which
// has no error returns, to the File's request (see File.guard).
type storeFault struct{ err error }

func (st *store) fault(err error, what string) {
	panic(storeFault{fmt.Errorf("%w: %s: %w", ErrStore, what, err)})
}

// silent drops Pebble's log lines: its errors reach us as errors.
type silent struct{}

func (silent) Infof(string, ...any)  {}
func (silent) Errorf(string, ...any) {}
func (silent) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// memTableSize is the size of Pebble's memtables.
const memTableSize = 16 << 20

// openStore opens or creates the store in dir, with a cache of about
// cacheBytes: a quarter for chunks and pages of accounts, the rest for
// Pebble, which reserves its memtables in it (two or three of
// memTableSize) and caches blocks in what is left, where the ID index's
// filters and index blocks must stay for a new ID's lookup to cost no read
// (measured: with half for chunks, a new key's decision costs 2.5 times as
// much; with 16 MiB in all, which leaves no room for blocks, 1.7 times,
// and 1.1 times since storedIDs tells new hashed IDs without a read).
func openStore(dir string, cacheBytes int64, mustExist bool) (*store, error) {
	cache := pebble.NewCache(max(cacheBytes-cacheBytes/4, 8<<20))
	defer cache.Unref()
	opts := &pebble.Options{
		Cache:            cache,
		MemTableSize:     memTableSize,
		Logger:           silent{},
		ErrorIfNotExists: mustExist,
		// Every checkpoint writes keys all over the key space (accounts,
		// their lists): compacting level 0 less often, in larger runs,
		// rewrites the levels below less (measured: a third less
		// compaction, a decision 5% cheaper), for a few more files to look
		// an ID up in.
		L0CompactionThreshold:     8,
		L0CompactionFileThreshold: 1000,
		L0StopWritesThreshold:     64,
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %w", ErrStore, dir, err)
	}
	st := &store{
		db:      db,
		budget:  cacheBytes / 4,
		inCache: map[cached]bool{},
		loaded:  map[uint32][listKinds]uint32{},
	}
	if err := st.known.load(db, time.Now()); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: open %s: %w", ErrStore, dir, err)
	}
	return st, nil
}

func (st *store) close() error {
	if st.batch != nil {
		st.batch.Close()
		st.batch = nil
	}
	st.known.close()
	return st.db.Close()
}

// readFar starts reading what the store holds that it reads apart, once
// its File is open: the IDs beyond storedIDs' horizon.
func (st *store) readFar() error {
	if err := st.known.readFar(st.db); err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	return nil
}

func key1(space byte, n uint32) []byte {
	k := make([]byte, 5)
	k[0] = space
	binary.BigEndian.PutUint32(k[1:], n)
	return k
}

// idKey is the key of an ID: big-endian, so that time-ordered IDs (whose
// top bits are the time) make keys in the order they are written, which
// the store appends rather than merges.
func idKey(space byte, id tb.Uint128) []byte {
	k := make([]byte, 17)
	k[0] = space
	for i, b := range id {
		k[16-i] = b
	}
	return k
}

// idOfKey is the ID of a key made by idKey.
func idOfKey(key []byte) tb.Uint128 {
	var id tb.Uint128
	for i := range id {
		id[i] = key[16-i]
	}
	return id
}

func listKey(ai uint32, kind int, start uint32) []byte {
	k := make([]byte, 10)
	k[0] = keyList
	binary.BigEndian.PutUint32(k[1:], ai)
	k[5] = byte(kind)
	binary.BigEndian.PutUint32(k[6:], start)
	return k
}

// get returns a copy of the value of key, or nil if there is none.
func (st *store) get(key []byte) []byte {
	v, closer, err := st.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		st.fault(err, fmt.Sprintf("read key %q", key))
	}
	out := bytes.Clone(v)
	closer.Close()
	if out == nil {
		out = []byte{}
	}
	return out
}

// findID looks up an ID stored before the last checkpoint: among the
// transfers' IDs, or with failed, among the IDs that failed for good.
func (st *store) findID(id tb.Uint128, failed bool) (uint32, bool) {
	if !st.known.mayHold(id) {
		return 0, false
	}
	if id != st.lastID || id == tbZero {
		v := st.get(idKey(keyID, id))
		st.lastID, st.lastIdx, st.lastFound, st.lastFail = id, 0, len(v) >= 4, v != nil && len(v) < 4
		if st.lastFound {
			st.lastIdx = binary.BigEndian.Uint32(v)
		}
	}
	if failed {
		return 0, st.lastFail
	}
	return st.lastIdx, st.lastFound
}

// bytesOf views n values of T from p as bytes.
func bytesOf[T any](p *T, n int) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), n*int(unsafe.Sizeof(*p)))
}

// cache puts chunk c of v, of size bytes, in the cache, to be evicted
// in its turn if it is clean by then. A chunk that is not (being filled,
// or changed) stays counted, and is queued again when it has been written.
func (st *store) cache(v evictor, c uint32, size int64) {
	e := cached{v, c}
	st.fifo = append(st.fifo, e)
	if !st.inCache[e] {
		st.inCache[e] = true
		st.resident += size
	}
}

// touchAccount records that account ai changed.
func (st *store) touchAccount(ai uint32) {
	w := int(ai / 64)
	for w >= len(st.dirtyBits) {
		st.dirtyBits = append(st.dirtyBits, 0)
	}
	if st.dirtyBits[w]&(1<<(ai%64)) == 0 {
		st.dirtyBits[w] |= 1 << (ai % 64)
		st.dirty = append(st.dirty, ai)
	}
}

// trim ends a request: the lists loaded for it leave memory, and the
// oldest chunks of the cache too while it holds more than its budget.
func (s *state) trim() {
	st := s.st
	if st == nil {
		return
	}
	s.unloadLists()
	s.shed()
}

// shed takes the oldest chunks of the cache out of memory while it holds
// more than its budget. Between requests, and in the middle of a query
// that scans the accounts or the transfers (which holds no pointer into
// them from one to the next), so that a scan of them all holds no more
// than the cache.
func (s *state) shed() {
	st := s.st
	if st == nil {
		return
	}
	for st.resident > st.budget && st.head < len(st.fifo) {
		e := st.fifo[st.head]
		st.fifo[st.head] = cached{}
		st.head++
		if n := e.v.evict(e.c); n > 0 {
			st.resident -= n
			delete(st.inCache, e)
		}
	}
	if st.head > 1024 && st.head*2 > len(st.fifo) {
		st.fifo = append(st.fifo[:0], st.fifo[st.head:]...)
		st.head = 0
	}
}

// Transfer chunks.

func (a *xferArena) chunkLen(c uint32) int {
	return int(min(chunkSize, a.n-c*chunkSize))
}

func (a *xferArena) encode(c uint32) []byte {
	m := a.chunkLen(c)
	out := make([]byte, 0, 4+m*(xferSize+33))
	out = binary.LittleEndian.AppendUint32(out, uint32(m))
	out = append(out, bytesOf(&a.chunks[c][0], m)...)
	out = append(out, bytesOf(&a.ids[c][0], m)...)
	if int(c) < len(a.ud128) && a.ud128[c] != nil {
		out = append(out, 1)
		out = append(out, bytesOf(&a.ud128[c][0], m)...)
	} else {
		out = append(out, 0)
	}
	return out
}

// load reads chunk c back from the store.
func (a *xferArena) load(c uint32) *[chunkSize]xfer {
	if a.st == nil {
		panic("embedded: transfer chunk missing")
	}
	v := a.st.get(key1(keyTransfers, c))
	if len(v) < 4 {
		a.st.fault(errors.New("missing or short record"), fmt.Sprintf("transfers chunk %d", c))
	}
	m := int(binary.LittleEndian.Uint32(v))
	if m > chunkSize || len(v) != 4+m*(xferSize+16)+1 && len(v) != 4+m*(xferSize+32)+1 {
		a.st.fault(errors.New("bad length"), fmt.Sprintf("transfers chunk %d", c))
	}
	x, ids := new([chunkSize]xfer), new([chunkSize]tb.Uint128)
	p := 4
	p += copy(bytesOf(&x[0], m), v[p:p+m*xferSize])
	p += copy(bytesOf(&ids[0], m), v[p:p+m*16])
	a.chunks[c], a.ids[c] = x, ids
	for int(c) >= len(a.ud128) {
		a.ud128 = append(a.ud128, nil)
	}
	if v[p] == 1 {
		ud := new([chunkSize]tb.Uint128)
		copy(bytesOf(&ud[0], m), v[p+1:])
		a.ud128[c] = ud
	}
	a.st.cache(a, c, a.chunkBytes(c))
	return x
}

func (a *xferArena) chunkBytes(c uint32) int64 {
	n := int64(chunkSize * (xferSize + 16))
	if int(c) < len(a.ud128) && a.ud128[c] != nil {
		n += chunkSize * 16
	}
	return n
}

func (a *xferArena) evict(c uint32) int64 {
	if a.chunks[c] == nil || c >= a.flushed>>chunkShift || a.dirty[c] {
		return 0
	}
	n := a.chunkBytes(c)
	a.chunks[c], a.ids[c] = nil, nil
	if int(c) < len(a.ud128) {
		a.ud128[c] = nil
	}
	return n
}

// flush writes the chunks changed since the last checkpoint to b, and
// returns a function that records that they were committed.
func (a *xferArena) flush(b *pebble.Batch) func() {
	var cs []uint32
	for c := range a.dirty {
		cs = append(cs, c)
	}
	for c := a.flushed >> chunkShift; a.flushed < a.n && c*chunkSize < a.n; c++ {
		if !a.dirty[c] {
			cs = append(cs, c)
		}
	}
	for _, c := range cs {
		b.Set(key1(keyTransfers, c), a.encode(c), nil)
	}
	return func() {
		for _, c := range cs {
			// A chunk full and written is clean: it may leave memory.
			if c < a.n>>chunkShift {
				a.st.cache(a, c, a.chunkBytes(c))
			}
		}
		clear(a.dirty)
		a.flushed = a.n
	}
}

// Expiry log chunks.

func (l *chunked[T]) load(c uint32) *[chunkSize]T {
	if l.st == nil {
		panic("embedded: chunk missing")
	}
	v := l.st.get(key1(l.space, c))
	m := int(min(chunkSize, l.flushed-c*chunkSize)) // what the store holds
	var zero T
	if len(v) != m*int(unsafe.Sizeof(zero)) {
		l.st.fault(errors.New("missing record or bad length"), fmt.Sprintf("chunk %d of %c", c, l.space))
	}
	x := new([chunkSize]T)
	copy(bytesOf(&x[0], m), v)
	l.chunks[c] = x
	l.st.cache(l, c, int64(unsafe.Sizeof(*x)))
	return x
}

func (l *chunked[T]) evict(c uint32) int64 {
	if l.chunks[c] == nil || c >= l.flushed>>chunkShift {
		return 0
	}
	l.chunks[c] = nil
	return int64(unsafe.Sizeof(*new([chunkSize]T)))
}

func (l *chunked[T]) flush(b *pebble.Batch) func() {
	var cs []uint32
	for c := l.flushed >> chunkShift; l.flushed < l.n && c*chunkSize < l.n; c++ {
		m := int(min(chunkSize, l.n-c*chunkSize))
		b.Set(key1(l.space, c), bytes.Clone(bytesOf(&l.chunks[c][0], m)), nil)
		cs = append(cs, c)
	}
	return func() {
		for _, c := range cs {
			if c < l.n>>chunkShift {
				l.st.cache(l, c, int64(unsafe.Sizeof(*l.chunks[c])))
			}
		}
		l.flushed = l.n
	}
}

// Account pages.

// load reads page c back from the store.
func (l *acctArena) load(c uint32) *[acctPage]acct {
	st := l.st
	if st == nil {
		panic("embedded: account page missing")
	}
	lo, hi := c*acctPage, min(c*acctPage+acctPage, l.flushed)
	it, err := st.db.NewIter(&pebble.IterOptions{LowerBound: key1(keyAccount, lo), UpperBound: key1(keyAccount, hi)})
	if err != nil {
		st.fault(err, "accounts")
	}
	p := new([acctPage]acct)
	ai := lo
	for it.First(); it.Valid(); it.Next() {
		if binary.BigEndian.Uint32(it.Key()[1:]) != ai || !decodeAcct(it.Value(), &p[ai-lo]) {
			it.Close()
			st.fault(errors.New("damaged or out of place"), fmt.Sprintf("account record %d", ai))
		}
		ai++
	}
	if err := it.Close(); err != nil {
		st.fault(err, "accounts")
	}
	if ai != hi {
		st.fault(fmt.Errorf("%d records where %d were expected", ai-lo, hi-lo), fmt.Sprintf("account page %d", c))
	}
	l.pages[c] = p
	st.cache(l, c, acctPageBytes)
	return p
}

// acctPageBytes is what a page of clean accounts takes in memory (their
// lists are empty).
const acctPageBytes = int64(unsafe.Sizeof([acctPage]acct{}))

// evict drops page c unless an account in it changed since the last
// checkpoint, or was used since the page's last turn: then the page gets
// another (a second chance, so that the pages of hot keys stay; measured:
// without it, reading pages back took a tenth of a known key's decision).
func (l *acctArena) evict(c uint32) int64 {
	if l.pages[c] == nil || l.st.pageDirty(c) || min(c*acctPage+acctPage, l.n) > l.flushed {
		return 0
	}
	if bit := uint64(1) << (c & 63); l.used[c>>6]&bit != 0 {
		l.used[c>>6] &^= bit
		l.st.cache(l, c, acctPageBytes)
		return 0
	}
	l.pages[c] = nil
	return acctPageBytes
}

// pageDirty reports whether an account of page c changed since the last
// checkpoint.
func (st *store) pageDirty(c uint32) bool {
	const perWord = 64 / acctPage
	w := int(c / perWord)
	return w < len(st.dirtyBits) && st.dirtyBits[w]>>(c%perWord*acctPage)&(1<<acctPage-1) != 0
}

// idBlock is how many account IDs one record of the store holds.
const idBlock = 64

// flushIDs writes the IDs of the blocks that gained accounts since the
// last checkpoint to b.
func (l *acctArena) flushIDs(b *pebble.Batch) {
	if l.n <= l.flushed {
		return
	}
	for c := l.flushed / idBlock; c*idBlock < l.n; c++ {
		lo, hi := c*idBlock, min(c*idBlock+idBlock, l.n)
		v := make([]byte, 0, 16*(hi-lo))
		for ai := lo; ai < hi; ai++ {
			id := l.at(ai).id
			v = append(v, id[:]...)
		}
		b.Set(key1(keyAcctIDs, c), v, nil)
	}
}

// ID sets.

func (s *ids) flush(b *pebble.Batch) func() {
	cutoff := idTimeAt(time.Now())
	for k := range s.n {
		if s.failed {
			b.Set(idKey(keyID, s.key(k)), nil, nil)
		} else {
			b.Set(idKey(keyID, s.key(k)), binary.BigEndian.AppendUint32(nil, s.base+k), nil)
		}
	}
	return func() {
		for k := range s.n {
			s.st.known.add(s.key(k), cutoff)
		}
		s.st.known.settle(cutoff)
		s.base += s.n
		s.idSet = idSet{}
		s.st.lastID = tbZero // what it said of an ID may be out of date
	}
}

// Account lists.

// readList returns the stored entries of list kind of account ai, each of
// size bytes, up to n entries.
func (st *store) readList(ai uint32, kind int, size int, n uint32) []byte {
	it, err := st.db.NewIter(&pebble.IterOptions{LowerBound: listKey(ai, kind, 0), UpperBound: listKey(ai, kind, n)})
	if err != nil {
		st.fault(err, "list")
	}
	out := make([]byte, 0, int(n)*size)
	for it.First(); it.Valid(); it.Next() {
		start := binary.BigEndian.Uint32(it.Key()[6:])
		if int(start)*size != len(out) {
			it.Close()
			st.fault(fmt.Errorf("entry %d where %d was expected", start, len(out)/size), fmt.Sprintf("list %d of account %d", kind, ai))
		}
		out = append(out, it.Value()...)
	}
	if err := it.Close(); err != nil {
		st.fault(err, "list")
	}
	if len(out) != int(n)*size {
		st.fault(fmt.Errorf("%d bytes where %d were expected", len(out), int(n)*size), fmt.Sprintf("list %d of account %d", kind, ai))
	}
	return out
}

func (st *store) readIdx(ai uint32, kind int, n uint32) []uint32 {
	b := st.readList(ai, kind, 4, n)
	out := make([]uint32, n, int(n)+64)
	copy(bytesOf(unsafe.SliceData(out), int(n)), b)
	return out
}

func readD[T any](st *store, ai uint32, kind int, l *dlist[T]) {
	if l.base == 0 {
		return
	}
	var zero T
	b := st.readList(ai, kind, int(unsafe.Sizeof(zero)), l.base)
	out := make([]T, l.base, l.len())
	copy(bytesOf(unsafe.SliceData(out), int(l.base)), b)
	l.m = append(out, l.m...)
	l.base = 0
}

// loadLists brings the whole lists of account ai into memory for the
// request under way (trim takes them out again).
func (s *state) loadLists(ai uint32) {
	st := s.st
	if st == nil {
		return
	}
	if _, ok := st.loaded[ai]; ok {
		return
	}
	a := s.accounts.at(ai)
	bases := [listKinds]uint32{a.debits.base, a.credits.base, a.expired.base, a.ckpts.base, a.history.base}
	st.loaded[ai] = bases
	for kind, l := range []*idxList{&a.debits, &a.credits, &a.expired} {
		if l.base > 0 {
			l.rebuild(0, l.mem(st.readIdx(ai, kind, l.base)))
		}
	}
	readD(st, ai, listCkpts, &a.ckpts)
	readD(st, ai, listHistory, &a.history)
}

// unloadLists takes out of memory again the lists loadLists brought in.
func (s *state) unloadLists() {
	for ai, bases := range s.st.loaded {
		if ai >= s.accounts.n {
			continue // rolled back
		}
		a := s.accounts.at(ai)
		for kind, l := range []*idxList{&a.debits, &a.credits, &a.expired} {
			l.rebuild(bases[kind], l.mem(nil))
		}
		a.ckpts.m = append([]ckpt(nil), a.ckpts.m[bases[listCkpts]:]...)
		a.ckpts.base = bases[listCkpts]
		a.history.m = append([]balance(nil), a.history.m[bases[listHistory]:]...)
		a.history.base = bases[listHistory]
	}
	clear(s.st.loaded)
}

// flushAccount writes account ai and what its lists gained to b, and
// returns a function that records they were committed.
func (s *state) flushAccount(b *pebble.Batch, ai uint32) func() {
	a := s.accounts.at(ai)
	for kind, l := range []*idxList{&a.debits, &a.credits, &a.expired} {
		if l.memLen() > 0 {
			vs := l.mem(nil)
			b.Set(listKey(ai, kind, l.base), bytes.Clone(bytesOf(&vs[0], len(vs))), nil)
		}
	}
	if len(a.ckpts.m) > 0 {
		b.Set(listKey(ai, listCkpts, a.ckpts.base), bytes.Clone(bytesOf(&a.ckpts.m[0], len(a.ckpts.m))), nil)
	}
	if len(a.history.m) > 0 {
		b.Set(listKey(ai, listHistory, a.history.base), bytes.Clone(bytesOf(&a.history.m[0], len(a.history.m))), nil)
	}
	b.Set(key1(keyAccount, ai), encodeAcct(a), nil)
	return func() {
		for _, l := range []*idxList{&a.debits, &a.credits, &a.expired} {
			*l = idxList{base: uint32(l.len())}
		}
		a.ckpts = dlist[ckpt]{base: uint32(a.ckpts.len())}
		a.history = dlist[balance]{base: uint32(a.history.len())}
	}
}

func encodeAcct(a *acct) []byte {
	out := make([]byte, 0, acctRecordSize)
	out = append(out, a.id[:]...)
	out = append(out, a.ud128[:]...)
	out = binary.LittleEndian.AppendUint64(out, a.ud64)
	out = binary.LittleEndian.AppendUint64(out, a.ts)
	out = binary.LittleEndian.AppendUint32(out, a.ud32)
	out = binary.LittleEndian.AppendUint32(out, a.ledger)
	out = binary.LittleEndian.AppendUint16(out, a.code)
	out = binary.LittleEndian.AppendUint16(out, a.flags)
	out = binary.LittleEndian.AppendUint16(out, a.flags0)
	for _, v := range []u128.Uint{a.dPend, a.dPost, a.cPend, a.cPost} {
		out = append(out, bytesOf(&v, 1)...)
	}
	for _, n := range []int{a.debits.len(), a.credits.len(), a.expired.len(), a.ckpts.len(), a.history.len()} {
		out = binary.LittleEndian.AppendUint32(out, uint32(n))
	}
	return out
}

func decodeAcct(b []byte, a *acct) bool {
	if len(b) != acctRecordSize {
		return false
	}
	r := reader{b: b}
	*a = acct{}
	copy(a.id[:], r.next(16))
	copy(a.ud128[:], r.next(16))
	a.ud64, a.ts = r.u64(), r.u64()
	a.ud32, a.ledger = r.u32(), r.u32()
	a.code, a.flags, a.flags0 = r.u16(), r.u16(), r.u16()
	for _, v := range []*u128.Uint{&a.dPend, &a.dPost, &a.cPend, &a.cPost} {
		copy(bytesOf(v, 1), r.next(16))
	}
	a.debits.base, a.credits.base, a.expired.base = r.u32(), r.u32(), r.u32()
	a.ckpts.base, a.history.base = r.u32(), r.u32()
	return true
}

type reader struct {
	b   []byte
	bad bool
}

func (r *reader) next(n int) []byte {
	if len(r.b) < n {
		r.bad = true
		r.b = make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u16() uint16 { return binary.LittleEndian.Uint16(r.next(2)) }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.next(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.next(8)) }

// Checkpoints.

// checkpointAt is checkpoint under e.mu.
func (e *Engine) checkpointAt(walTime uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.checkpoint(walTime)
}

// trim is state.trim under e.mu.
func (e *Engine) trim() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st.trim()
}

// checkpointBatch returns the batch for a checkpoint: the last one's,
// emptied, if Pebble left it to us, else a new one sized as the last
// checkpoint's and a quarter (grown by doubling, a batch of 10 MiB would
// leave 20 MiB of garbage), up to half a memtable: a batch kept is under
// that, and one made for a large checkpoint (the first after a burst of
// new accounts) would otherwise keep its room for good.
//
// Pebble copies a committed batch smaller than half its memtable into the
// memtable, off the Go heap, and the batch's buffer serves again; a larger
// one becomes a memtable of its own, its buffer held on the Go heap until
// it is flushed, and every checkpoint then leaves its buffer to the
// collector. A checkpoint's batch is about twice and a quarter the
// journal it covers, which is why checkpointBytes is under a quarter of
// memTableSize (measured against 4 MiB, whose batches of 9 MB Pebble
// took: 2 million known-key decisions then a million new keys, two
// rounds, the most resident memory over the second half of each 0.83×
// and 0.87×, the known keys decided 1.07× as fast, the new 0.98×).
func (st *store) checkpointBatch() *pebble.Batch {
	if st.batch == nil {
		size := min(st.batchSize+st.batchSize/4, memTableSize/2)
		st.batch = st.db.NewBatchWithSize(size, pebble.WithMaxRetainedSizeBytes(memTableSize))
	}
	return st.batch
}

// keepBatch ends a checkpoint's batch: kept for the next checkpoint if
// the commit succeeded and Pebble left the buffer to it (it empties the
// batch of one it took as a memtable), else closed.
func (st *store) keepBatch(committed bool) {
	b := st.batch
	if committed && b.Len() == st.batchSize {
		b.Reset()
		return
	}
	b.Close()
	st.batch = nil
}

// checkpoint writes everything that changed since the last checkpoint,
// with the engine's clock and counters and walTime, the cluster time of
// the last request applied, in one synced batch. e.mu is held.
func (e *Engine) checkpoint(walTime uint64) error {
	s, st := e.st, e.st.st
	s.unloadLists()
	b := st.checkpointBatch()
	committed := false
	defer func() { st.keepBatch(committed) }() // and closed if a read of the store panics
	var done []func()
	done = append(done, s.transfers.flush(b), s.expired.flush(b), s.transferIDs.flush(b), s.failedIDs.flush(b))
	for _, ai := range st.dirty {
		if ai < s.accounts.n {
			done = append(done, s.flushAccount(b, ai))
		}
	}
	s.accounts.flushIDs(b)
	b.Set([]byte{keyMeta}, e.encodeMeta(walTime), nil)
	st.batchSize = b.Len()
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("%w: checkpoint: %w", ErrStore, err)
	}
	committed = true
	for _, f := range done {
		f()
	}
	s.accounts.flushed = s.accounts.n
	// The pages changed are clean now: they may leave memory.
	for w, bits := range st.dirtyBits {
		for c := uint32(w) * (64 / acctPage); bits != 0 && int(c) < len(s.accounts.pages); c++ {
			if bits&(1<<acctPage-1) != 0 {
				st.cache(&s.accounts, c, acctPageBytes)
			}
			bits >>= acctPage
		}
	}
	clear(st.dirtyBits)
	st.dirty = st.dirty[:0]
	st.walTime = walTime
	return nil
}

func (e *Engine) encodeMeta(walTime uint64) []byte {
	s := e.st
	out := []byte(storeMagic)
	u32 := func(v uint32) { out = binary.LittleEndian.AppendUint32(out, v) }
	u64 := func(v uint64) { out = binary.LittleEndian.AppendUint64(out, v) }
	u32(storeVersion)
	for _, n := range []int{xferSize, ckptSize, balanceSize, expiredSize} {
		u32(uint32(n))
	}
	u64(walTime)
	u64(e.last)
	u64(s.lastEvent)
	u64(s.pendingCount)
	u64(s.expiredCount)
	u64(s.nextExpiry)
	u32(s.transfers.n)
	u32(s.failedIDs.len())
	u32(s.expired.n)
	u32(s.accounts.n)
	for _, op := range e.opStats() {
		u64(op.Requests)
		u64(op.Events)
	}
	u32(uint32(len(s.queues)))
	for k := range s.queues {
		q := &s.queues[k]
		u32(q.timeout)
		u32(q.n)
		for i := range q.n {
			p := q.head + i
			u32(q.chunks[p>>chunkShift][p&chunkMask])
		}
	}
	u32(uint32(len(s.expiries)))
	for _, x := range s.expiries {
		u64(x.at)
		u32(x.idx)
	}
	return out
}

func (e *Engine) opStats() []*OpStats {
	t := &e.stats
	return []*OpStats{&t.CreateAccounts, &t.CreateTransfers, &t.LookupAccounts, &t.LookupTransfers,
		&t.GetAccountTransfers, &t.GetAccountBalances, &t.QueryAccounts, &t.QueryTransfers, &t.GetChangeEvents}
}

// attach makes the engine, which must be new, keep its state in st, and
// loads what st holds. It returns the cluster time of the last request
// st holds and whether st holds a checkpoint (0 and false for a new
// store).
func (e *Engine) attach(st *store) (walTime uint64, found bool, err error) {
	s := e.st
	s.st = st
	s.accounts.st = st
	s.transfers.st, s.transfers.dirty = st, map[uint32]bool{}
	s.transferIDs.st = st
	s.failedIDs.st, s.failedIDs.failed = st, true
	s.expired.st, s.expired.space = st, keyExpired
	v := st.get([]byte{keyMeta})
	if v == nil {
		return 0, false, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: %s; refusing to use the store", ErrCorrupt, why)
	}
	if !bytes.HasPrefix(v, []byte(storeMagic)) {
		return 0, false, bad("its meta record is not one")
	}
	r := reader{b: v[len(storeMagic):]}
	if ver := r.u32(); ver != storeVersion {
		return 0, false, bad(fmt.Sprintf("store format version %d; this program reads version %d", ver, storeVersion))
	}
	for _, n := range []int{xferSize, ckptSize, balanceSize, expiredSize} {
		if got := r.u32(); got != uint32(n) {
			return 0, false, bad(fmt.Sprintf("written with records of %d bytes where this program has %d (another architecture or version)", got, n))
		}
	}
	walTime = r.u64()
	e.last = r.u64()
	e.issued.Store(e.last)
	s.lastEvent, s.pendingCount, s.expiredCount, s.nextExpiry = r.u64(), r.u64(), r.u64(), r.u64()
	nx, nf, ne, na := r.u32(), r.u32(), r.u32(), r.u32()
	for _, op := range e.opStats() {
		op.Requests, op.Events = r.u64(), r.u64()
	}
	nq := r.u32()
	if nq > maxQueues {
		return 0, false, bad("too many expiry queues")
	}
	for range nq {
		q := expiryQueue{timeout: r.u32()}
		n := r.u32()
		if int(n) > len(r.b)/4 {
			return 0, false, bad("an expiry queue longer than its record")
		}
		for range n {
			q.push(r.u32())
		}
		s.queues = append(s.queues, q)
	}
	nh := r.u32()
	if int(nh) > len(r.b)/12 {
		return 0, false, bad("an expiry heap longer than its record")
	}
	s.expiries = make(expiryHeap, nh)
	for i := range s.expiries {
		s.expiries[i] = expiry{at: r.u64(), idx: r.u32()}
	}
	if r.bad || len(r.b) != 0 {
		return 0, false, bad("its meta record has the wrong length")
	}
	chunks := int((nx + chunkMask) >> chunkShift)
	s.transfers.n, s.transfers.flushed = nx, nx
	s.transfers.chunks = make([]*[chunkSize]xfer, chunks)
	s.transfers.ids = make([]*[chunkSize]tb.Uint128, chunks)
	s.transfers.ud128 = make([]*[chunkSize]tb.Uint128, chunks)
	s.transferIDs.base = nx
	s.failedIDs.base = nf
	s.expired.n, s.expired.flushed = ne, ne
	s.expired.chunks = make([]*[chunkSize]expiredEvent, (ne+chunkMask)>>chunkShift)

	pages := (na + acctPageMask) >> acctPageShift
	s.accounts = acctArena{st: st, n: na, flushed: na, pages: make([]*[acctPage]acct, pages), used: make([]uint64, (pages+63)/64)}
	// The IDs are held while the index is built, to find one stored twice.
	ids := make([]tb.Uint128, 0, na)
	s.accountIdx = table{}
	s.accountIdx.reserve(na)
	idOf := func(i uint32) tb.Uint128 { return ids[i] }
	it, err := st.db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyAcctIDs}, UpperBound: []byte{keyAcctIDs + 1}})
	if err != nil {
		return 0, false, fmt.Errorf("%w: %w", ErrStore, err)
	}
	distinct := uint32(0)
	for it.First(); it.Valid(); it.Next() {
		c, v := binary.BigEndian.Uint32(it.Key()[1:]), it.Value()
		n := uint32(len(ids))
		if c != n/idBlock || n%idBlock != 0 || len(v)%16 != 0 || len(v) > 16*idBlock || n+uint32(len(v)/16) > na {
			it.Close()
			return 0, false, bad(fmt.Sprintf("the account IDs of block %d are damaged or out of place", c))
		}
		for k := 0; k < len(v); k += 16 {
			id := tb.Uint128(v[k : k+16])
			ids = append(ids, id)
			h := hashID(id)
			if _, dup := s.accountIdx.find(id, h, idOf); !dup {
				s.accountIdx.put(h, uint32(len(ids)-1))
				distinct++
			}
		}
	}
	if err := it.Close(); err != nil {
		return 0, false, fmt.Errorf("%w: %w", ErrStore, err)
	}
	if uint32(len(ids)) != na || distinct != na {
		return 0, false, bad(fmt.Sprintf("%d account IDs (%d distinct) where the meta record says %d accounts", len(ids), distinct, na))
	}
	st.walTime = walTime
	return walTime, true, nil
}
