package embedded

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
	tb "github.com/tigerbeetle/tigerbeetle-go"

	"github.com/tblimit/tblimit/internal/u128"
)

// storedIDs is what the store knows of the transfer IDs it holds (those
// of transfers and those that failed for good), so that a new ID of the
// kind TigerBeetle recommends, time-based (tb.ID, ledger.NewID: the time
// in milliseconds in the top 48 bits), is known to be new without a read:
// every decision creates one, and a read of an ID the store does not hold
// costs a look at every level of it (measured: a fifth of the CPU of
// decisions on new keys, most of it on the one goroutine that applies
// requests).
//
// An ID was stored with a cutoff, the time then (idTimeAt) and a minute
// more. Those of a time up to their cutoff are all at most below; those
// of a time beyond it and up to horizon are in ahead. So an ID of a time
// up to horizon above below is stored only if ahead holds it. Other IDs
// (hashed ones, such as the IDs ledger derives from keys, whose times are
// anything) are read from the store as before. ahead holds few IDs: a
// hashed ID's time falls beyond the cutoff and within the horizon (two
// years) once in about 4,500, and a time-based one only from a clock
// ahead of this one, until the cutoff passes it (settle).
type storedIDs struct {
	below   tb.Uint128
	ahead   map[tb.Uint128]struct{}
	soonest uint64 // the earliest time in ahead (math.MaxUint64 when empty)
	horizon uint64
}

const (
	// idMargin is how far past the clock a stored ID's time may be and
	// still count in below.
	idMargin = time.Minute
	// idHorizon is how far past the time the store was opened IDs are
	// told new without a read (beyond, every ID is read).
	idHorizon = 2 * 365 * 24 * time.Hour
)

// idTime is the time an ID carries in its top 48 bits, in milliseconds
// since the Unix epoch if it is time-based.
func idTime(id tb.Uint128) uint64 { return u128.From(id).Hi >> 16 }

// idTimeAt is the cutoff of IDs stored at t.
func idTimeAt(t time.Time) uint64 { return uint64(max(t.Add(idMargin).UnixMilli(), 0)) }

// idOfTime is the least ID of time ms.
func idOfTime(ms uint64) tb.Uint128 { return u128.FromParts(0, ms<<16) }

// load reads what the IDs stored in db are, for a store opened at now.
func (k *storedIDs) load(db *pebble.DB, now time.Time) error {
	cutoff := idTimeAt(now)
	k.horizon = cutoff + uint64(idHorizon.Milliseconds())
	k.ahead, k.soonest = map[tb.Uint128]struct{}{}, ^uint64(0)
	// The greatest ID of a time up to the cutoff, then those beyond it up
	// to the horizon.
	beyond := idKey(keyID, idOfTime(cutoff+1))
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyID}, UpperBound: idKey(keyID, idOfTime(k.horizon+1))})
	if err != nil {
		return err
	}
	if it.SeekLT(beyond) {
		k.below = idOfKey(it.Key())
	}
	for it.SeekGE(beyond); it.Valid(); it.Next() {
		k.add(idOfKey(it.Key()), cutoff)
	}
	return it.Close()
}

// add notes that id is stored, with cutoff.
func (k *storedIDs) add(id tb.Uint128, cutoff uint64) {
	switch t := idTime(id); {
	case t <= cutoff:
		if u128.Cmp(id, k.below) > 0 {
			k.below = id
		}
	case t <= k.horizon:
		k.ahead[id] = struct{}{}
		k.soonest = min(k.soonest, t)
	}
}

// settle moves the IDs of ahead that cutoff passed to below, so that
// ahead holds only IDs of times to come.
func (k *storedIDs) settle(cutoff uint64) {
	if k.soonest > cutoff {
		return
	}
	k.soonest = ^uint64(0)
	for id := range k.ahead {
		if t := idTime(id); t <= cutoff {
			delete(k.ahead, id)
			k.add(id, cutoff)
		} else {
			k.soonest = min(k.soonest, t)
		}
	}
}

// mayHold reports whether id may be stored: false only if it is not.
func (k *storedIDs) mayHold(id tb.Uint128) bool {
	if idTime(id) > k.horizon || u128.Cmp(id, k.below) <= 0 {
		return true
	}
	_, ok := k.ahead[id]
	return ok
}
