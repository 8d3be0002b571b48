package embedded

import (
	"math/rand/v2"
	"testing"

	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/internal/u128"
)

func TestIDSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s idSet
	var keys []tb.Uint128
	index := map[tb.Uint128]uint32{}
	check := func() {
		t.Helper()
		if s.len() != uint32(len(keys)) {
			t.Fatalf("len() = %d, want %d", s.len(), len(keys))
		}
		for i, k := range keys {
			if got, ok := s.find(k); !ok || got != uint32(i) {
				t.Fatalf("find(key %d) = %d, %v", i, got, ok)
			}
		}
	}
	for step := range 20000 {
		switch {
		case len(keys) > 0 && rng.IntN(4) == 0:
			// Rollback removes the newest keys.
			last := keys[len(keys)-1]
			s.removeLast()
			keys = keys[:len(keys)-1]
			delete(index, last)
			if _, ok := s.find(last); ok {
				t.Fatalf("step %d: removed key still found", step)
			}
		default:
			var k tb.Uint128
			switch rng.IntN(3) {
			case 0: // sequential
				k = tb.ToUint128(uint64(step))
			case 1: // time-ordered
				k = tb.ID()
			default: // random
				k = toU128Pair(rng.Uint64(), rng.Uint64())
			}
			if _, dup := index[k]; dup {
				continue
			}
			index[k] = s.add(k)
			keys = append(keys, k)
		}
		if step%1000 == 0 {
			check()
		}
	}
	check()
	for range 1000 {
		if _, ok := s.find(toU128Pair(rng.Uint64(), rng.Uint64()|1<<63)); ok {
			t.Fatal("found a key never added")
		}
	}
}

func toU128Pair(lo, hi uint64) tb.Uint128 { return u128.FromParts(lo, hi) }

// TestTableWithoutIDs checks a table as the account index uses it, with no
// IDs of its own, against the IDs it is given to confirm a match with:
// among them two whose hashes have the same 32 bits, which only the IDs
// tell apart.
func TestTableWithoutIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var ids []tb.Uint128
	seen := map[uint64]tb.Uint128{}
	var twin [2]tb.Uint128
	for twin[0] == tbZero {
		id := toU128Pair(rng.Uint64(), rng.Uint64())
		if other, ok := seen[hashID(id)>>32]; ok {
			twin = [2]tb.Uint128{other, id}
			break
		}
		seen[hashID(id)>>32] = id
	}
	idOf := func(i uint32) tb.Uint128 { return ids[i] }
	var x table
	add := func(id tb.Uint128) {
		ids = append(ids, id)
		x.put(hashID(id), uint32(len(ids)-1))
	}
	add(twin[0])
	for range 5000 {
		add(toU128Pair(rng.Uint64(), rng.Uint64()))
	}
	if i, ok := x.find(twin[1], hashID(twin[1]), idOf); ok {
		t.Fatalf("an ID never added, whose hash has the same 32 bits as account 0's, found at %d", i)
	}
	add(twin[1])
	for i, id := range ids {
		if got, ok := x.find(id, hashID(id), idOf); !ok || got != uint32(i) {
			t.Fatalf("find(ID %d) = %d, %v", i, got, ok)
		}
	}
	// Rollback removes the newest accounts.
	for len(ids) > 1 {
		last := uint32(len(ids) - 1)
		x.remove(hashID(ids[last]), last)
		gone := ids[last]
		ids = ids[:last]
		if i, ok := x.find(gone, hashID(gone), idOf); ok {
			t.Fatalf("removed account %d still found at %d", last, i)
		}
		if len(ids)%500 == 0 {
			for i, id := range ids {
				if got, ok := x.find(id, hashID(id), idOf); !ok || got != uint32(i) {
					t.Fatalf("after removals, find(ID %d) = %d, %v", i, got, ok)
				}
			}
		}
	}
}

func TestExpiryHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h expiryHeap
	for i := range 5000 {
		h.push(expiry{at: rng.Uint64N(100), idx: uint32(i)})
	}
	prev := expiry{}
	for len(h) > 0 {
		e := h.pop()
		if e.at < prev.at || (e.at == prev.at && e.idx < prev.idx) {
			t.Fatalf("pop() = %+v after %+v", e, prev)
		}
		prev = e
	}
}
