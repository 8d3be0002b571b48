package embedded

import (
	"sync/atomic"
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
// anything) fall beyond the horizon (all but about one in 150: their top
// 48 bits are anything up to 2^48 ms, 8,900 years) and are told by Bloom
// filters of those the store holds: a new key's first decision creates one
// (its provisioning credit), and reading it from the store cost more than
// the rest of the request (measured: three quarters of the engine's time
// on new keys). Those of a time up to the cutoff and not above below are
// read. ahead holds few IDs: a hashed ID's time falls beyond the cutoff and
// within the horizon (two years) once in about 4,500, and a time-based one
// only from a clock ahead of this one, until the cutoff passes it (settle).
//
// The IDs beyond the horizon held on open are many (one a key ever seen)
// and are read into opened by a goroutine of their own (readFar), once the
// File is open, so that a start does not wait for them (nor share the
// machine with them: reading 1.3 million took 0.18 s, and slowed an open
// beside it by 0.09 s): until it is done, every such ID is read from the
// store. far holds those stored since.
type storedIDs struct {
	below   tb.Uint128
	ahead   map[tb.Uint128]struct{}
	soonest uint64 // the earliest time in ahead (math.MaxUint64 when empty)
	horizon uint64
	far     idFilter // the IDs beyond the horizon stored since open

	opened atomic.Pointer[idFilter] // those stored before, once read
	stop   atomic.Bool              // asks loadFar to give up
	done   chan struct{}            // closed when loadFar returns
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

// load reads what the IDs stored in db are, for a store opened at now,
// but for those beyond the horizon (see readFar).
func (k *storedIDs) load(db *pebble.DB, now time.Time) error {
	cutoff := idTimeAt(now)
	k.horizon = cutoff + uint64(idHorizon.Milliseconds())
	k.ahead, k.soonest = map[tb.Uint128]struct{}{}, ^uint64(0)
	// The greatest ID of a time up to the cutoff, then those beyond it up
	// to the horizon.
	beyond := idKey(keyID, idOfTime(cutoff+1))
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyID}, UpperBound: k.farKey()})
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

// farKey is the least key of an ID beyond the horizon.
func (k *storedIDs) farKey() []byte { return idKey(keyID, idOfTime(k.horizon+1)) }

// readFar starts reading the IDs beyond the horizon that db holds (see
// loadFar), once, after load. close must be called before db is closed.
func (k *storedIDs) readFar(db *pebble.DB) error {
	if k.done != nil {
		return nil
	}
	// An iterator reads the store as it is when made: what is stored
	// after it, add puts in k.far.
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: k.farKey(), UpperBound: []byte{keyID + 1}})
	if err != nil {
		return err
	}
	k.done = make(chan struct{})
	go k.loadFar(it)
	return nil
}

// loadFar reads the IDs it iterates over into a filter, and makes it
// k.opened unless it is stopped (close) or the read fails, which leaves
// those IDs to be read from the store.
func (k *storedIDs) loadFar(it *pebble.Iterator) {
	defer close(k.done)
	var f idFilter
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if n++; n%4096 == 0 && k.stop.Load() {
			it.Close()
			return
		}
		f.add(idOfKey(it.Key()))
	}
	if it.Close() == nil {
		k.opened.Store(&f)
	}
}

// close stops loadFar and waits for it.
func (k *storedIDs) close() {
	if k.done != nil {
		k.stop.Store(true)
		<-k.done
	}
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
	default:
		k.far.add(id)
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
	if idTime(id) > k.horizon {
		opened := k.opened.Load()
		return opened == nil || opened.mayHold(id) || k.far.mayHold(id)
	}
	if u128.Cmp(id, k.below) <= 0 {
		return true
	}
	_, ok := k.ahead[id]
	return ok
}

// idFilter is a Bloom filter of IDs that grows with them: a run of
// filters, each with room for twice the IDs of the one before, the last
// taking new IDs. Each filter keeps 10 bits an ID, and sets an ID's 7 bits
// in one block of 512 (a cache line), so that a look costs a cache miss a
// filter: about 1% of the IDs it does not hold are said to be held (and
// read from the store) while a filter is full, which the run adds up to a
// few in a hundred. It costs 1.25 to 2.5 bytes an ID.
type idFilter struct {
	runs []idBloom
}

// idBloom is one filter of an idFilter's run.
type idBloom struct {
	blocks  [][8]uint64
	n, room int
}

const (
	bloomFirstRoom = 1 << 16 // IDs the first filter of a run holds
	bloomBitsPerID = 10
	bloomProbes    = 7
)

// add notes id as held.
func (f *idFilter) add(id tb.Uint128) {
	if len(f.runs) == 0 || f.runs[len(f.runs)-1].n == f.runs[len(f.runs)-1].room {
		room := bloomFirstRoom
		if len(f.runs) > 0 {
			room = 2 * f.runs[len(f.runs)-1].room
		}
		f.runs = append(f.runs, idBloom{blocks: make([][8]uint64, room*bloomBitsPerID/512), room: room})
	}
	b := &f.runs[len(f.runs)-1]
	block, probes := b.at(hashID(id))
	for range bloomProbes {
		block[probes>>6&7] |= 1 << (probes & 63)
		probes >>= 9
	}
	b.n++
}

// mayHold reports whether id may have been added: false only if it was
// not.
func (f *idFilter) mayHold(id tb.Uint128) bool {
	h := hashID(id)
	for i := range f.runs {
		if f.runs[i].has(h) {
			return true
		}
	}
	return false
}

// at returns the block of an ID hashed to h, and the bits to set in it: 9
// bits a probe, a word of 8 and a bit of 64.
func (b *idBloom) at(h uint64) (*[8]uint64, uint64) {
	block := &b.blocks[(h>>32)*uint64(len(b.blocks))>>32]
	return block, h * 0x9E3779B97F4A7C15 >> 1
}

// has reports whether every bit of an ID hashed to h is set.
func (b *idBloom) has(h uint64) bool {
	block, probes := b.at(h)
	for range bloomProbes {
		if block[probes>>6&7]&(1<<(probes&63)) == 0 {
			return false
		}
		probes >>= 9
	}
	return true
}
