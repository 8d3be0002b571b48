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

// idSet is an insertion-ordered set of 128-bit IDs. Key i is the i-th ID
// added, so it doubles as the index of the object stored under that ID.
//
// The hash table is open addressing with linear probing. Each slot holds the
// top 32 bits of the ID's hash beside index+1 (0 marks an empty slot), about
// 11 to 21 bytes per key at a load of 3/8 to 3/4. A probe that meets a
// different hash moves on without touching the key; a key is read only when
// the 32 bits match. A key's home slot is given by the top bits of its hash,
// which the slot keeps: so the table is in hash order, growing reads the old
// table and writes the new one front to back without reading or hashing any
// key, and deleting never reads keys either.
type idSet struct {
	slots []uint64
	shift uint8 // 64 - log2(len(slots)): the home of hash h is h >> shift
	keys  []*[chunkSize]tb.Uint128
	n     uint32
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
	if s.n == 0 {
		return 0, false
	}
	tag := h >> 32
	slots := s.slots
	mask := uint64(len(slots) - 1)
	for p := h >> s.shift; ; p = (p + 1) & mask {
		slot := slots[p]
		if slot == 0 {
			return 0, false
		}
		if slot>>32 == tag {
			i := uint32(slot) - 1
			if s.key(i) == id {
				return i, true
			}
		}
	}
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
	if uint64(i+1)*4 > uint64(len(s.slots))*3 {
		s.grow()
	}
	s.insert(h>>32<<32 | uint64(i+1))
	s.n++
	return i
}

// insert puts a slot value into the first free slot from its home.
func (s *idSet) insert(slot uint64) {
	mask := uint64(len(s.slots) - 1)
	p := slot >> s.shift
	for s.slots[p] != 0 {
		p = (p + 1) & mask
	}
	s.slots[p] = slot
}

// grow doubles the table (16 slots at first).
func (s *idSet) grow() {
	old := s.slots
	size := max(16, 2*len(old))
	s.slots = make([]uint64, size)
	s.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	// Old slots in order: their homes in the new table ascend, so the writes
	// go front to back (but for the few that wrapped around the end).
	for _, slot := range old {
		if slot != 0 {
			s.insert(slot)
		}
	}
}

// removeLast removes the most recently added ID (linked-chain rollback).
func (s *idSet) removeLast() {
	i := s.n - 1
	mask := uint64(len(s.slots) - 1)
	p := hashID(s.key(i)) >> s.shift
	for uint32(s.slots[p]) != i+1 {
		p = (p + 1) & mask
	}
	// Backward-shift deletion keeps every probe sequence unbroken.
	s.slots[p] = 0
	for j := (p + 1) & mask; s.slots[j] != 0; j = (j + 1) & mask {
		home := s.slots[j] >> s.shift
		// Move slot j into the hole at p unless its home lies cyclically in (p, j].
		if (j > p && (home <= p || home > j)) || (j < p && home <= p && home > j) {
			s.slots[p], s.slots[j] = s.slots[j], 0
			p = j
		}
	}
	s.keys[i>>chunkShift][i&chunkMask] = tbZero
	s.n--
}

// xferArena stores transfer records by index, in timestamp order. User
// data 128 lives beside them, in chunks made only for transfers that have
// some: most leave it zero, and then cost 16 bytes less.
type xferArena struct {
	chunks []*[chunkSize]xfer
	ud128  []*[chunkSize]tb.Uint128 // nil chunks: all zero
	n      uint32
}

func (a *xferArena) at(i uint32) *xfer { return &a.chunks[i>>chunkShift][i&chunkMask] }

func (a *xferArena) push() (uint32, *xfer) {
	i := a.n
	if i&chunkMask == 0 && int(i>>chunkShift) == len(a.chunks) {
		a.chunks = append(a.chunks, new([chunkSize]xfer))
	}
	a.n++
	return i, a.at(i)
}

func (a *xferArena) pop() {
	a.n--
	*a.at(a.n) = xfer{}
	a.setUD128(a.n, tbZero)
}

// userData128 returns the user data 128 of transfer i.
func (a *xferArena) userData128(i uint32) tb.Uint128 {
	if c := int(i >> chunkShift); c < len(a.ud128) && a.ud128[c] != nil {
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
type idxList struct {
	head []uint32
	tail *[chunkSize]uint32 // the last of more.chunks, being filled
	fill int32              // entries in tail
	more *idxChunks         // nil until head is full
}

type idxChunks struct{ chunks []*[chunkSize]uint32 }

func (l *idxList) len() int {
	if l.tail == nil {
		return len(l.head)
	}
	return chunkSize*len(l.more.chunks) + int(l.fill) // the head is full
}

func (l *idxList) at(k int) uint32 {
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
// copies what it holds.
type chunked[T any] struct {
	chunks []*[chunkSize]T
	n      uint32
}

func (l *chunked[T]) at(i uint32) *T { return &l.chunks[i>>chunkShift][i&chunkMask] }

// push appends a zero T and returns its index and a pointer to it.
func (l *chunked[T]) push() (uint32, *T) {
	i := l.n
	if i&chunkMask == 0 && int(i>>chunkShift) == len(l.chunks) {
		l.chunks = append(l.chunks, new([chunkSize]T))
	}
	l.n++
	return i, l.at(i)
}
