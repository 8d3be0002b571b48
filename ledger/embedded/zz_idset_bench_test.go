package embedded

import (
	"encoding/binary"
	"testing"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

func seqID(seq uint64) tb.Uint128 {
	var v [16]byte
	binary.LittleEndian.PutUint64(v[:8], seq)
	binary.LittleEndian.PutUint64(v[8:], 0x0190_0000_0000_1234)
	return tb.Uint128(v)
}

// BenchmarkIDSetAdd: find (miss) + add of time-ordered IDs into a set
// preloaded with 1M, growing.
func BenchmarkIDSetAdd(b *testing.B) {
	var s idSet
	seq := uint64(1) << 40
	for range 1 << 20 {
		seq++
		s.add(seqID(seq))
	}
	for b.Loop() {
		seq++
		id := seqID(seq)
		h := hashID(id)
		if _, ok := s.findHashed(id, h); ok {
			b.Fatal()
		}
		s.addHashed(id, h)
	}
}
