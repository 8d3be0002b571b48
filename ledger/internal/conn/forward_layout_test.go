package conn

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Encode lays every tb type out as TigerBeetle does, byte for byte: as
// tigerbeetle-go's client hands TigerBeetle its structs' memory (on a
// little-endian machine, as every machine TigerBeetle runs on is), every
// field in its place, reserved bytes included. TestForwardCodec checks
// that Decode reads Encode back; this checks what goes over the wire is
// TigerBeetle's layout, which ledger.proto documents for clients in other
// languages.
func TestForwardCodecIsTigerBeetlesLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	layout[tb.Account](t, r, 128)
	layout[tb.Transfer](t, r, 128)
	layout[tb.Uint128](t, r, 16)
	layout[tb.CreateAccountResult](t, r, 16)
	layout[tb.CreateTransferResult](t, r, 16)
	layout[tb.AccountFilter](t, r, 128)
	layout[tb.AccountBalance](t, r, 128)
	layout[tb.QueryFilter](t, r, 64)
	layout[tb.ChangeEventsFilter](t, r, 64)
	layout[tb.ChangeEvent](t, r, 384)
}

// layout checks Encode against the memory of values of E whose every
// byte is random, and Decode against the values, for a few counts.
func layout[E any](t *testing.T, r *rand.Rand, size int) {
	t.Helper()
	var zero E
	if got := int(unsafe.Sizeof(zero)); got != size {
		t.Errorf("%T is %d bytes, want %d", zero, got, size)
	}
	for _, n := range []int{1, 3, 100} {
		vs := make([]E, n)
		mem := unsafe.Slice((*byte)(unsafe.Pointer(&vs[0])), n*size)
		for i := range mem {
			mem[i] = byte(r.Uint32())
		}
		if enc := Encode(vs); !bytes.Equal(enc, mem) {
			t.Errorf("Encode(%d %T) is not TigerBeetle's layout:\n got %x\nwant %x", n, zero, enc, mem)
		}
		if got, err := Decode[E](bytes.Clone(mem)); err != nil || !reflect.DeepEqual(got, vs) {
			t.Errorf("Decode(%d %T in TigerBeetle's layout) = %v, %v; want them back", n, zero, got, err)
		}
	}
}
