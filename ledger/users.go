package ledger

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tblimit/tblimit/ledger/internal/view"
)

// user is what a Client keeps of one user's limit account on one resource.
type user struct {
	// The fields every decision reads or writes come first, in the
	// struct's first two cache lines (the view's first fields with them):
	// a Zipf load calls most users seldom, and each line of a user it
	// reads is then a miss. A user is 256 bytes, a size class whose
	// objects start on a cache line.
	mu sync.Mutex
	// denial, when set, is a denial the view decided under mu and that
	// holds as it is until its instants pass: since it was set, nothing
	// but denials happened to the user, for everyone but a denial or a
	// plan's check (which change nothing) takes mu with lock, which clears
	// it (readers too: one rule to check). A drained user, typically hot,
	// is denied from it without taking mu.
	denial atomic.Pointer[denial]
	id     ID        // UserID(res.Ledger, key)
	v      view.View // u.mu
	lease  *lease    // u.mu; nil unless WithLeases took one
	key    string    // its key on res.Ledger, normalised
	// rare holds what few users need, in a struct of its own so that a
	// user stays 256 bytes (u.mu); nil for most.
	rare *rareUser
	res  Resource
}

// rareUser is what a user seldom needs.
type rareUser struct {
	// planning, while not nil, is closed when a change of the user's
	// limit to its plan ends.
	planning chan struct{}
}

// rarely returns u.rare, made if need be. u.mu is held.
func (u *user) rarely() *rareUser {
	if u.rare == nil {
		u.rare = &rareUser{}
	}
	return u.rare
}

// planning returns the channel of the plan change under way, or nil.
// u.mu is held.
func (u *user) planning() chan struct{} {
	if u.rare == nil {
		return nil
	}
	return u.rare.planning
}

// lock takes u.mu for anything but a local denial or a plan's check: a
// published denial may no longer hold once it is released.
func (u *user) lock() {
	u.mu.Lock()
	u.withdraw()
}

// users is the Client's table of users, found by resource and key (one
// lookup per decision: the account ID is derived once, when a user is
// added), in shards that are emptied when full, which bounds its memory
// (about WithUserCache's users) at the cost of forgetting what was
// known of the users dropped: a user the table does not hold has a view
// that knows nothing, so its decisions go to the cluster, as they do for a
// user never seen.
type users struct {
	lag time.Duration // how late the cluster may free a returned hold: see view.New
	max int           // users a shard holds before it is emptied
	// hot caches users in front of the shards: a user found there costs
	// no lock, whose read side is a write every caller of a hot user
	// shares. A slot holds a user its shard holds (or held: see get).
	hot    [hotSlots]atomic.Pointer[user]
	shards [userShards]userShard
}

type userShard struct {
	mu sync.RWMutex
	m  map[userKey]*user
	// Shards 128 bytes apart never share a cache line, however the table
	// is aligned: a shard's read lock is written by every lookup.
	_ [128 - 32]byte
}

const (
	userShards = 64
	hotSlots   = 256
	cacheOdds  = 8
)

// userKey names a user in the table: its resource's ledger and its key,
// normalised.
type userKey struct {
	ledger uint32
	key    string
}

// name is u's key in the table.
func (u *user) name() userKey { return userKey{u.res.Ledger, u.key} }

// place returns the shard of k, its index, and k's slot in the cache.
func (us *users) place(k userKey) (*userShard, uint32, *atomic.Pointer[user]) {
	h := keyHash(k.ledger, k.key)
	i := h % userShards
	return &us.shards[i], i, &us.hot[h/userShards%hotSlots]
}

// get returns user key on r, adding it if the table does not hold it: its
// view assumes r's default limit and knows of nothing in flight.
//
// A slot is filled and emptied under its user's shard lock (read side to
// fill, write side to empty), so that a user the shard dropped is not
// cached again. One dropped while a call held it may live on in that call,
// as it may without the cache.
func (us *users) get(r Resource, key string) *user {
	k := userKey{r.Ledger, key}
	s, i, slot := us.place(k)
	x := slot.Load()
	if x != nil && x.name() == k {
		return x
	}
	// A user found in its shard takes an empty slot, or, one time in
	// cacheOdds, a taken one: a hot user soon, a cold one seldom (each
	// write is to a line every core shares).
	fill := x == nil || rand.Uint32()%cacheOdds == 0
	s.mu.RLock()
	u := s.m[k]
	if u != nil && fill {
		slot.Store(u)
	}
	s.mu.RUnlock()
	if u != nil {
		return u
	}
	id := UserID(r.Ledger, key) // outside the lock: it may hash
	s.mu.Lock()
	defer s.mu.Unlock()
	if u = s.m[k]; u != nil {
		return u
	}
	if s.m == nil || len(s.m) >= us.max {
		s.m = make(map[userKey]*user, 64)
		us.uncache(i)
	}
	u = &user{key: key, id: id, res: r}
	u.v = view.New(r.DefaultLimit, uint64(r.Window), uint64(us.lag), false)
	s.m[k] = u
	if fill {
		slot.Store(u)
	}
	return u
}

// uncache empties the cache's slots that hold a user of shard i. Its lock
// is held.
func (us *users) uncache(i uint32) {
	for j := range us.hot {
		if x := us.hot[j].Load(); x != nil {
			if _, xi, _ := us.place(x.name()); xi == i {
				us.hot[j].Store(nil)
			}
		}
	}
}

// forget drops what is known of user key on ledger.
func (us *users) forget(ledger uint32, key string) {
	k := userKey{ledger, key}
	s, _, slot := us.place(k)
	s.mu.Lock()
	delete(s.m, k)
	if x := slot.Load(); x != nil && x.name() == k {
		slot.Store(nil)
	}
	s.mu.Unlock()
}

// provisioned records that user key's account on r exists and its limit
// was credited: its decisions need not provision it (see sight).
func (us *users) provisioned(r Resource, key string) {
	u := us.get(r, key)
	u.mu.Lock() // not lock: what the view counts is as it was
	u.v.Provisioned = true
	u.mu.Unlock()
}

// knownLimit records that this Client set user key's limit on r to limit.
// On a fresh account (nothing can be in flight yet) the view counts as read
// at now (this Client's clock); on another, units this Client did not take
// may be in flight, and the view is stale until a read.
func (us *users) knownLimit(r Resource, key string, limit uint64, fresh bool, now int64) {
	u := us.get(r, key)
	u.lock()
	var at int64 // units may be in flight that this Client did not take
	if fresh {
		at = now
	}
	u.v.KnowLimit(limit, at)
	u.mu.Unlock()
}
