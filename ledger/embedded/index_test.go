package embedded

import (
	"math/big"
	"math/rand/v2"
	"testing"

	tb "github.com/tigerbeetle/tigerbeetle-go"
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

func toU128Pair(lo, hi uint64) tb.Uint128 { return u128{lo, hi}.tb() }

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

func FuzzU128(f *testing.F) {
	f.Add(uint64(0), uint64(0), uint64(1), uint64(0))
	f.Add(^uint64(0), ^uint64(0), uint64(1), uint64(0))
	f.Add(^uint64(0), uint64(0), uint64(1), uint64(0))
	f.Fuzz(func(t *testing.T, alo, ahi, blo, bhi uint64) {
		a, b := u128{alo, ahi}, u128{blo, bhi}
		ab, bb := toBig(a), toBig(b)
		if got := toU128(a.tb()); got != a {
			t.Fatalf("round trip %v = %v", a, got)
		}
		if got := a.tb().BigInt(); got.Cmp(ab) != 0 {
			t.Fatalf("tb.Uint128 of %v = %v, want %v", a, got, ab)
		}
		sum, over := a.add(b)
		want := new(big.Int).Add(ab, bb)
		if over != (want.BitLen() > 128) || (!over && toBig(sum).Cmp(want) != 0) {
			t.Fatalf("%v + %v = %v, %v", a, b, sum, over)
		}
		if a.less(b) != (ab.Cmp(bb) < 0) {
			t.Fatalf("%v < %v = %v", a, b, a.less(b))
		}
		if !a.less(b) {
			if got := toBig(a.sub(b)); got.Cmp(new(big.Int).Sub(ab, bb)) != 0 {
				t.Fatalf("%v - %v = %v", a, b, got)
			}
		} else if !a.subSat(b).isZero() {
			t.Fatalf("subSat(%v, %v) = %v, want 0", a, b, a.subSat(b))
		}
	})
}

func toBig(a u128) *big.Int {
	v := new(big.Int).SetUint64(a.hi)
	return v.Lsh(v, 64).Or(v, new(big.Int).SetUint64(a.lo))
}
