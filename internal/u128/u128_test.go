package u128

import (
	"math"
	"math/big"
	"testing"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

var two128 = new(big.Int).Lsh(big.NewInt(1), 128)

func toBig(a Uint) *big.Int {
	return new(big.Int).Add(new(big.Int).Lsh(new(big.Int).SetUint64(a.Hi), 64), new(big.Int).SetUint64(a.Lo))
}

func TestConversions(t *testing.T) {
	tests := []struct {
		v      tb.Uint128
		lo, hi uint64
	}{
		{tb.ToUint128(0), 0, 0},
		{tb.ToUint128(1), 1, 0},
		{tb.ToUint128(1 << 63), 1 << 63, 0},
		{tb.AmountMax, ^uint64(0), ^uint64(0)},
		{tb.BigIntToUint128(new(big.Int).Lsh(big.NewInt(3), 64)), 0, 3},
	}
	for _, tt := range tests {
		if got := From(tt.v); got != (Uint{tt.lo, tt.hi}) {
			t.Errorf("From(%v) = %+v, want {%d %d}", tt.v, got, tt.lo, tt.hi)
		}
		if got := FromParts(tt.lo, tt.hi); got != tt.v {
			t.Errorf("FromParts(%d, %d) = %v, want %v", tt.lo, tt.hi, got, tt.v)
		}
		if lo, hi := tt.v.Uint64(); lo != tt.lo || hi != tt.hi {
			t.Errorf("%v.Uint64() = %d, %d: the byte order differs from tigerbeetle-go's", tt.v, lo, hi)
		}
		var p tb.Uint128
		From(tt.v).Put(&p)
		if p != tt.v {
			t.Errorf("Put(%v) stored %v", tt.v, p)
		}
		if got := toBig(From(tt.v)); got.Cmp(tt.v.BigInt()) != 0 {
			t.Errorf("From(%v) is %v, want %v", tt.v, got, tt.v.BigInt())
		}
	}
	if Max.TB() != tb.AmountMax || !(Uint{}).IsZero() || (Uint{Hi: 1}).IsZero() {
		t.Error("Max or IsZero is wrong")
	}
}

func TestArithmetic(t *testing.T) {
	m := ^uint64(0)
	tests := []struct {
		a, b     Uint
		sum      Uint
		overflow bool
		diff     Uint
		borrow   bool
		cmp      int
	}{
		{Uint{}, Uint{}, Uint{}, false, Uint{}, false, 0},
		{Uint{1, 0}, Uint{2, 0}, Uint{3, 0}, false, Uint{m, m}, true, -1},
		{Uint{m, 0}, Uint{1, 0}, Uint{0, 1}, false, Uint{m - 1, 0}, false, 1},
		{Uint{0, 1}, Uint{1, 0}, Uint{1, 1}, false, Uint{m, 0}, false, 1},
		{Max, Uint{1, 0}, Uint{}, true, Uint{m - 1, m}, false, 1},
		{Max, Max, Uint{m - 1, m}, true, Uint{}, false, 0},
		{Uint{5, 1}, Uint{7, 1}, Uint{12, 2}, false, Uint{m - 1, m}, true, -1},
		{Uint{7, 0}, Uint{5, 1}, Uint{12, 1}, false, Uint{2, m}, true, -1},
	}
	for _, tt := range tests {
		if sum, o := tt.a.Add(tt.b); sum != tt.sum || o != tt.overflow {
			t.Errorf("%+v.Add(%+v) = %+v, %v; want %+v, %v", tt.a, tt.b, sum, o, tt.sum, tt.overflow)
		}
		if diff, b := tt.a.Sub(tt.b); diff != tt.diff || b != tt.borrow {
			t.Errorf("%+v.Sub(%+v) = %+v, %v; want %+v, %v", tt.a, tt.b, diff, b, tt.diff, tt.borrow)
		}
		if c := tt.a.Cmp(tt.b); c != tt.cmp {
			t.Errorf("%+v.Cmp(%+v) = %d, want %d", tt.a, tt.b, c, tt.cmp)
		}
		a, b := tt.a.TB(), tt.b.TB()
		if sum, o := Add(a, b); sum != tt.sum.TB() || o != tt.overflow {
			t.Errorf("Add(%v, %v) = %v, %v; want %v, %v", a, b, sum, o, tt.sum.TB(), tt.overflow)
		}
		if diff, bo := Sub(a, b); diff != tt.diff.TB() || bo != tt.borrow {
			t.Errorf("Sub(%v, %v) = %v, %v; want %v, %v", a, b, diff, bo, tt.diff.TB(), tt.borrow)
		}
		if c := Cmp(a, b); c != tt.cmp {
			t.Errorf("Cmp(%v, %v) = %d, want %d", a, b, c, tt.cmp)
		}
	}
}

// FuzzArithmetic checks Add, Sub and Cmp against math/big.
func FuzzArithmetic(f *testing.F) {
	m := ^uint64(0)
	f.Add(uint64(0), uint64(0), uint64(0), uint64(0))
	f.Add(m, m, uint64(1), uint64(0))
	f.Add(m, uint64(0), uint64(1), uint64(0))
	f.Add(uint64(0), uint64(1), uint64(1), uint64(0))
	f.Fuzz(func(t *testing.T, alo, ahi, blo, bhi uint64) {
		a, b := Uint{alo, ahi}, Uint{blo, bhi}
		ba, bb := toBig(a), toBig(b)
		want := new(big.Int).Add(ba, bb)
		sum, o := a.Add(b)
		if o != (want.Cmp(two128) >= 0) || toBig(sum).Cmp(want.Mod(want, two128)) != 0 {
			t.Fatalf("%+v.Add(%+v) = %+v, %v", a, b, sum, o)
		}
		want = new(big.Int).Sub(ba, bb)
		diff, borrow := a.Sub(b)
		if borrow != (want.Sign() < 0) || toBig(diff).Cmp(want.Mod(want, two128)) != 0 {
			t.Fatalf("%+v.Sub(%+v) = %+v, %v", a, b, diff, borrow)
		}
		if c := a.Cmp(b); c != ba.Cmp(bb) {
			t.Fatalf("%+v.Cmp(%+v) = %d, want %d", a, b, c, ba.Cmp(bb))
		}
		if From(a.TB()) != a || Cmp(a.TB(), b.TB()) != ba.Cmp(bb) {
			t.Fatalf("%+v does not round-trip through tb.Uint128", a)
		}
	})
}

func TestDecimal(t *testing.T) {
	for _, c := range []struct {
		v    tb.Uint128
		want string
	}{
		{FromParts(0, 0), "0"},
		{FromParts(5011, 0), "5011"},
		{FromParts(math.MaxUint64, 0), "18446744073709551615"},
		{FromParts(0, 1), "18446744073709551616"},
		{FromParts(math.MaxUint64, math.MaxUint64), "340282366920938463463374607431768211455"},
	} {
		if got := Decimal(c.v); got != c.want {
			t.Errorf("Decimal(%s) = %s, want %s", c.v, got, c.want)
		}
	}
}
