package embedded

import tb "github.com/tigerbeetle/tigerbeetle-go"

// Stored objects live in chunked arenas: growing never copies what is
// already stored and wastes at most one partly filled chunk.
const (
	chunkShift = 10
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
)

// idSet is an insertion-ordered set of 128-bit IDs. Key i is the i-th ID
// added, so it doubles as the index of the object stored under that ID.
// The hash table is open addressing with linear probing: each slot holds
// 32 bits of the hash (to skip most key comparisons) and index+1 (0 marks an
// empty slot), about 11 to 21 bytes per key at a load of 3/8 to 3/4.
type idSet struct {
	slots []uint64
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
	mask := uint64(len(s.slots) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		slot := s.slots[p]
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

// add appends id, which must not be in the set, and returns its index.
func (s *idSet) add(id tb.Uint128) uint32 { return s.addHashed(id, hashID(id)) }

// addHashed is add with the ID's hash already computed.
func (s *idSet) addHashed(id tb.Uint128, h uint64) uint32 {
	i := s.n
	if i&chunkMask == 0 && int(i>>chunkShift) == len(s.keys) {
		s.keys = append(s.keys, new([chunkSize]tb.Uint128))
	}
	s.keys[i>>chunkShift][i&chunkMask] = id
	s.n++
	if uint64(s.n)*4 > uint64(len(s.slots))*3 {
		s.rehash(max(16, 2*len(s.slots)))
	} else {
		s.insert(h, i)
	}
	return i
}

func (s *idSet) insert(h uint64, i uint32) {
	mask := uint64(len(s.slots) - 1)
	p := h & mask
	for s.slots[p] != 0 {
		p = (p + 1) & mask
	}
	s.slots[p] = h>>32<<32 | uint64(i+1)
}

func (s *idSet) rehash(size int) {
	s.slots = make([]uint64, size)
	for i := uint32(0); i < s.n; i++ {
		s.insert(hashID(s.key(i)), i)
	}
}

// removeLast removes the most recently added ID (linked-chain rollback).
func (s *idSet) removeLast() {
	i := s.n - 1
	id := s.key(i)
	mask := uint64(len(s.slots) - 1)
	p := hashID(id) & mask
	for uint32(s.slots[p]) != i+1 {
		p = (p + 1) & mask
	}
	// Backward-shift deletion keeps every probe sequence unbroken.
	s.slots[p] = 0
	for j := (p + 1) & mask; s.slots[j] != 0; j = (j + 1) & mask {
		home := hashID(s.key(uint32(s.slots[j])-1)) & mask
		// Move slot j into the hole at p unless its home lies cyclically in (p, j].
		if (j > p && (home <= p || home > j)) || (j < p && home <= p && home > j) {
			s.slots[p], s.slots[j] = s.slots[j], 0
			p = j
		}
	}
	s.keys[i>>chunkShift][i&chunkMask] = tbZero
	s.n--
}

// xferArena stores transfer records by index, in timestamp order.
type xferArena struct {
	chunks []*[chunkSize]xfer
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
