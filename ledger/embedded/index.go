package embedded

import (
	"math/bits"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Stored objects live in chunked arenas: growing never copies what is
// already stored and wastes at most one partly filled chunk.
const (
	chunkShift = 10
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
)

// table is the hash table of an idSet, or of the accounts (see
// state.findAccount), which hold their IDs themselves: open addressing
// with linear probing. Each slot holds the top 32 bits of an ID's hash
// beside index+1 (0 marks an empty slot), 8 bytes a slot, about 11 to 21
// bytes per key at a load of 3/8 to 3/4. A probe that meets a different
// hash moves on without reading the ID; an ID is read only when the 32 bits
// match. A key's home slot is given by the top bits of its hash, which the
// slot keeps: so the table is in hash order, growing reads the old table
// and writes the new one front to back without reading or hashing any ID,
// and deleting never reads IDs either.
type table struct {
	slots []uint64
	shift uint8  // 64 - log2(len(slots)): the home of hash h is h >> shift
	n     uint32 // indexes held
}

// find returns the index of id, whose hash is h; idOf returns the ID of
// an index, read only when its 32 bits of hash match.
func (t *table) find(id tb.Uint128, h uint64, idOf func(uint32) tb.Uint128) (uint32, bool) {
	if t.n == 0 {
		return 0, false
	}
	tag := h >> 32
	slots := t.slots
	mask := uint64(len(slots) - 1)
	for p := h >> t.shift; ; p = (p + 1) & mask {
		slot := slots[p]
		if slot == 0 {
			return 0, false
		}
		if slot>>32 == tag {
			if i := uint32(slot) - 1; idOf(i) == id {
				return i, true
			}
		}
	}
}

// put adds index i, of an ID of hash h that the table does not hold.
func (t *table) put(h uint64, i uint32) {
	if uint64(t.n+1)*4 > uint64(len(t.slots))*3 {
		t.grow()
	}
	t.insert(h>>32<<32 | uint64(i+1))
	t.n++
}

// insert puts a slot value into the first free slot from its home.
func (t *table) insert(slot uint64) {
	mask := uint64(len(t.slots) - 1)
	p := slot >> t.shift
	for t.slots[p] != 0 {
		p = (p + 1) & mask
	}
	t.slots[p] = slot
}

// grow doubles the table (16 slots at first).
func (t *table) grow() { t.resize(max(16, 2*len(t.slots))) }

// reserve makes room for n IDs, so that adding them does not grow the
// table again and again.
func (t *table) reserve(n uint32) {
	size := max(16, len(t.slots))
	for uint64(n)*4 > uint64(size)*3 {
		size *= 2
	}
	if size > len(t.slots) {
		t.resize(size)
	}
}

// resize moves the table to size slots, a power of two.
func (t *table) resize(size int) {
	old := t.slots
	t.slots = make([]uint64, size)
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	// Old slots in order: their homes in the new table ascend, so the writes
	// go front to back (but for the few that wrapped around the end).
	for _, slot := range old {
		if slot != 0 {
			t.insert(slot)
		}
	}
}

// remove removes index i, of an ID of hash h.
func (t *table) remove(h uint64, i uint32) {
	t.n--
	mask := uint64(len(t.slots) - 1)
	p := h >> t.shift
	for uint32(t.slots[p]) != i+1 {
		p = (p + 1) & mask
	}
	// Backward-shift deletion keeps every probe sequence unbroken.
	t.slots[p] = 0
	for j := (p + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		home := t.slots[j] >> t.shift
		// Move slot j into the hole at p unless its home lies cyclically in (p, j].
		if (j > p && (home <= p || home > j)) || (j < p && home <= p && home > j) {
			t.slots[p], t.slots[j] = t.slots[j], 0
			p = j
		}
	}
}

// idSet is an insertion-ordered set of 128-bit IDs. Key i is the i-th ID
// added, so it doubles as the index of the object stored under that ID.
// It keeps the IDs, in chunks, beside its table.
type idSet struct {
	table
	keys []*[chunkSize]tb.Uint128
}

func (s *idSet) len() uint32 { return s.n }

func (s *idSet) key(i uint32) tb.Uint128 { return s.keys[i>>chunkShift][i&chunkMask] }

// find returns the index of id.
func (s *idSet) find(id tb.Uint128) (uint32, bool) {
	if s.n == 0 {
		return 0, false
	}
	return s.findHashed(id, hashID(id))
}

// findHashed is find with the ID's hash already computed.
func (s *idSet) findHashed(id tb.Uint128, h uint64) (uint32, bool) {
	return s.table.find(id, h, s.key)
}

// touch reads the slot where a search for hash h starts, so that the
// search that follows finds it in the cache (see state.touchSlots).
func (s *idSet) touch(h uint64) uint64 {
	if len(s.slots) == 0 {
		return 0
	}
	return s.slots[h>>s.shift]
}

// add appends id, which must not be in the set, and returns its index.
func (s *idSet) add(id tb.Uint128) uint32 { return s.addHashed(id, hashID(id)) }

// addHashed is add with the ID's hash already computed.
func (s *idSet) addHashed(id tb.Uint128, h uint64) uint32 {
	i := s.n
	if i&chunkMask == 0 && int(i>>chunkShift) == len(s.keys) {
		s.keys = append(s.keys, new([chunkSize]tb.Uint128))
	}
	s.keys[i>>chunkShift][i&chunkMask] = id
	s.put(h, i)
	return i
}

// removeLast removes the most recently added ID (linked-chain rollback).
func (s *idSet) removeLast() {
	i := s.n - 1
	s.remove(hashID(s.key(i)), i)
	s.keys[i>>chunkShift][i&chunkMask] = tbZero
}

// xferArena stores transfer records by index, in timestamp order. User
// data 128 lives beside them, in chunks made only for transfers that have
// some: most leave it zero, and then cost 16 bytes less.
//
// With a store (see store.go), a chunk may be absent from memory (nil in
// chunks): it is read back from the store when used. The transfers' IDs
// then live beside them, in ids, since the idSet holds only the IDs added
// since the last checkpoint.
type xferArena struct {
	chunks []*[chunkSize]xfer
	ud128  []*[chunkSize]tb.Uint128 // nil chunks: all zero (or, with a store, not loaded)
	n      uint32

	st      *store                   // nil: everything stays in memory
	ids     []*[chunkSize]tb.Uint128 // with a store: the transfers' IDs
	flushed uint32                   // with a store: transfers [0, flushed) are in it
	dirty   map[uint32]bool          // with a store: chunks below flushed changed since
}

func (a *xferArena) at(i uint32) *xfer {
	c := a.chunks[i>>chunkShift]
	if c == nil {
		c = a.load(i >> chunkShift)
	}
	return &c[i&chunkMask]
}

func (a *xferArena) push() (uint32, *xfer) {
	i := a.n
	if i&chunkMask == 0 && int(i>>chunkShift) == len(a.chunks) {
		a.chunks = append(a.chunks, new([chunkSize]xfer))
		if a.st != nil {
			a.ids = append(a.ids, new([chunkSize]tb.Uint128))
		}
	}
	a.n++
	return i, a.at(i)
}

func (a *xferArena) pop() {
	a.n--
	*a.at(a.n) = xfer{}
	a.setUD128(a.n, tbZero)
	if a.st != nil {
		a.ids[a.n>>chunkShift][a.n&chunkMask] = tbZero
	}
}

// setState sets the pending state of transfer i.
func (a *xferArena) setState(i uint32, st uint16) {
	a.at(i).setState(st)
	if i < a.flushed {
		a.dirty[i>>chunkShift] = true
	}
}

// id returns the ID of transfer i; only with a store.
func (a *xferArena) id(i uint32) tb.Uint128 {
	a.at(i)
	return a.ids[i>>chunkShift][i&chunkMask]
}

// userData128 returns the user data 128 of transfer i.
func (a *xferArena) userData128(i uint32) tb.Uint128 {
	c := int(i >> chunkShift)
	if a.st != nil && a.chunks[c] == nil {
		a.load(uint32(c))
	}
	if c < len(a.ud128) && a.ud128[c] != nil {
		return a.ud128[c][i&chunkMask]
	}
	return tbZero
}

func (a *xferArena) setUD128(i uint32, v tb.Uint128) {
	c := int(i >> chunkShift)
	if c >= len(a.ud128) || a.ud128[c] == nil {
		if v == tbZero {
			return
		}
		for c >= len(a.ud128) {
			a.ud128 = append(a.ud128, nil)
		}
		a.ud128[c] = new([chunkSize]tb.Uint128)
	}
	a.ud128[c][i&chunkMask] = v
}

// expiry schedules the release of a pending transfer.
type expiry struct {
	at  uint64 // cluster time at which the transfer expires
	idx uint32 // arena index of the pending transfer
}

// expiryHeap is a binary min-heap ordered by (at, idx). Entries are removed
// lazily: one whose transfer is no longer pending (posted, voided, or rolled
// back) is skipped when it reaches the top.
type expiryHeap []expiry

func (h expiryHeap) less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].idx < h[j].idx)
}

func (h *expiryHeap) push(e expiry) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s.less(i, parent) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *expiryHeap) pop() expiry {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		m := l
		if r := l + 1; r < len(s) && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// expiryQueue holds, oldest first, the arena indexes of the pending
// transfers with one timeout. Their timestamps ascend with their indexes, so
// they expire in the order they were created: releasing them reads the
// queue and the arena front to back, instead of sifting a heap of millions
// through cache misses. It costs 4 bytes per pending transfer.
type expiryQueue struct {
	timeout uint32
	head    uint32 // position of the oldest entry in chunks[0]
	n       uint32
	chunks  []*[chunkSize]uint32
}

func (q *expiryQueue) front() uint32 { return q.chunks[0][q.head] }

func (q *expiryQueue) back() uint32 {
	p := q.head + q.n - 1
	return q.chunks[p>>chunkShift][p&chunkMask]
}

func (q *expiryQueue) push(idx uint32) {
	p := q.head + q.n
	if int(p>>chunkShift) == len(q.chunks) {
		q.chunks = append(q.chunks, new([chunkSize]uint32))
	}
	q.chunks[p>>chunkShift][p&chunkMask] = idx
	q.n++
}

func (q *expiryQueue) popFront() {
	q.head++
	q.n--
	if q.head == chunkSize {
		// Recycle the drained chunk at the end, where pushes need it next.
		c := q.chunks[0]
		copy(q.chunks, q.chunks[1:])
		q.chunks[len(q.chunks)-1] = c
		q.head = 0
	}
}

func (q *expiryQueue) popBack() { q.n-- }

// idxList is an ascending list of transfer indexes (an account's debits or
// credits). Its first chunkSize entries are a slice; the rest go in whole
// chunks, so that the list of a hot account (an operator credited by every
// decision) grows without copying what it holds. The chunk being filled is
// kept at hand, so that appending follows no more pointers than a slice.
// A list takes 48 bytes in its account (a slice took 24).
//
// With a store, the entries before base are in the store only (see
// store.go): the list holds those added since the last checkpoint, unless
// a query loaded the account's lists whole (state.loadLists).
type idxList struct {
	head []uint32
	tail *[chunkSize]uint32 // the last of more.chunks, being filled
	fill int32              // entries in tail
	base uint32             // entries [0, base) are not in memory
	more *idxChunks         // nil until head is full
}

type idxChunks struct{ chunks []*[chunkSize]uint32 }

func (l *idxList) len() int { return int(l.base) + l.memLen() }

// memLen is the number of entries in memory.
func (l *idxList) memLen() int {
	if l.tail == nil {
		return len(l.head)
	}
	return chunkSize*len(l.more.chunks) + int(l.fill) // the head is full
}

func (l *idxList) at(k int) uint32 {
	k -= int(l.base)
	if k < chunkSize {
		return l.head[k]
	}
	k -= chunkSize
	return l.more.chunks[k>>chunkShift][k&chunkMask]
}

func (l *idxList) push(v uint32) {
	if l.tail != nil && l.fill < chunkSize {
		l.tail[l.fill] = v
		l.fill++
		return
	}
	if n := len(l.head); n < chunkSize {
		if n == cap(l.head) {
			// Grow by doubling, up to chunkSize exactly.
			head := make([]uint32, n, min(max(2*n, 4), chunkSize))
			copy(head, l.head)
			l.head = head
		}
		l.head = append(l.head, v)
		return
	}
	if l.more == nil {
		l.more = new(idxChunks)
	}
	l.tail = new([chunkSize]uint32)
	l.more.chunks = append(l.more.chunks, l.tail)
	l.tail[0] = v
	l.fill = 1
}

// mem appends the entries in memory to out.
func (l *idxList) mem(out []uint32) []uint32 {
	for k := range l.memLen() {
		out = append(out, l.at(int(l.base)+k))
	}
	return out
}

// rebuild makes l the list of entries vs, of which the first base are
// left out of memory.
func (l *idxList) rebuild(base uint32, vs []uint32) {
	*l = idxList{}
	for _, v := range vs[base:] {
		l.push(v)
	}
	l.base = base
}

// pop removes the last entry (rollback).
func (l *idxList) pop() {
	if l.tail == nil {
		l.head = l.head[:len(l.head)-1]
		return
	}
	l.fill--
	if l.fill == 0 {
		c := l.more.chunks[:len(l.more.chunks)-1]
		l.more.chunks = c
		l.tail, l.fill = nil, 0
		if n := len(c); n > 0 {
			l.tail, l.fill = c[n-1], chunkSize
		}
	}
}

// chunked is an append-only list of T in chunks, so that growing never
// copies what it holds. With a store, a chunk may be absent from memory
// (nil), read back from the store when used; the list never changes what
// it stored.
type chunked[T any] struct {
	chunks []*[chunkSize]T
	n      uint32

	st      *store // nil: everything stays in memory
	space   byte   // with a store: its key space
	flushed uint32 // with a store: entries [0, flushed) are in it
}

func (l *chunked[T]) at(i uint32) *T {
	c := l.chunks[i>>chunkShift]
	if c == nil {
		c = l.load(i >> chunkShift)
	}
	return &c[i&chunkMask]
}

// push appends a zero T and returns its index and a pointer to it.
func (l *chunked[T]) push() (uint32, *T) {
	i := l.n
	if i&chunkMask == 0 && int(i>>chunkShift) == len(l.chunks) {
		l.chunks = append(l.chunks, new([chunkSize]T))
	}
	l.n++
	return i, l.at(i)
}

// acctArena stores accounts by index, in pages of acctPage. With a store
// (see store.go), a page may be absent from memory (nil in pages): it is
// read back from the store when used, so that memory holds the accounts
// in use and an index from ID to account, not every account ever made.
// Pages are small because accounts are found one at a time, by ID, in no
// order: a page read for one account should cost little.
type acctArena struct {
	pages []*[acctPage]acct
	n     uint32

	st      *store   // nil: everything stays in memory
	flushed uint32   // with a store: accounts [0, flushed) are in it
	used    []uint64 // with a store: the pages used since their last turn in the cache
}

// A page is 16 accounts (5 KiB): a decision that reads a cold account
// reads its page, and one that changes it keeps its page in memory until
// the next checkpoint.
const (
	acctPageShift = 4
	acctPage      = 1 << acctPageShift
	acctPageMask  = acctPage - 1
)

func (l *acctArena) at(i uint32) *acct {
	c := i >> acctPageShift
	p := l.pages[c]
	if p == nil {
		p = l.load(c)
	}
	if l.st != nil {
		l.used[c>>6] |= 1 << (c & 63)
	}
	return &p[i&acctPageMask]
}

// push appends a zero account and returns its index and a pointer to it.
func (l *acctArena) push() (uint32, *acct) {
	i := l.n
	if i&acctPageMask == 0 && int(i>>acctPageShift) == len(l.pages) {
		l.pages = append(l.pages, new([acctPage]acct))
		if l.st != nil && len(l.pages) > 64*len(l.used) {
			l.used = append(l.used, 0)
		}
	}
	l.n++
	return i, l.at(i)
}

// pop removes the last account (rollback), which is in memory.
func (l *acctArena) pop() {
	l.n--
	*l.at(l.n) = acct{}
}

// dlist is an append-only list of T whose entries before base are, with
// a store, in the store only (like idxList's); without one, base is 0 and
// it is a slice.
type dlist[T any] struct {
	m    []T
	base uint32
}

func (l *dlist[T]) len() int { return int(l.base) + len(l.m) }

func (l *dlist[T]) at(k int) *T { return &l.m[k-int(l.base)] }

func (l *dlist[T]) push(v T) { l.m = append(l.m, v) }

// truncate keeps the first n entries, all of those removed being in memory.
func (l *dlist[T]) truncate(n int) { l.m = l.m[:n-int(l.base)] }

// ids is a set of IDs, indexed in the order they were added: an idSet of
// the IDs from base on and, with a store, the earlier ones in the store.
type ids struct {
	idSet
	base   uint32
	st     *store
	failed bool // with a store: the IDs of transfers that failed for good
}

func (s *ids) len() uint32 { return s.base + s.n }

// find returns the index of id.
func (s *ids) find(id tb.Uint128) (uint32, bool) { return s.findHashed(id, hashID(id)) }

// findHashed is find with the ID's hash already computed.
func (s *ids) findHashed(id tb.Uint128, h uint64) (uint32, bool) {
	if i, ok := s.idSet.findHashed(id, h); ok {
		return s.base + i, true
	}
	if s.st == nil {
		return 0, false
	}
	return s.st.findID(id, s.failed)
}

// addHashed appends id, which must not be in the set, and returns its index.
func (s *ids) addHashed(id tb.Uint128, h uint64) uint32 { return s.base + s.idSet.addHashed(id, h) }
