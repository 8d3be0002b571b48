package ledger

import (
	"sync"
	"time"
)

// user is what a Client keeps of one user's limit account on one resource.
type user struct {
	mu    sync.Mutex
	id    ID
	res   Resource
	v     view   // u.mu
	lease *lease // u.mu; nil unless WithLeases took one
	// planning, while not nil, is closed when a change of the user's limit
	// to its plan ends (u.mu).
	planning chan struct{}
}

// users is the Client's table of users, in shards that are emptied when
// full, which bounds its memory (userShards × userShardLimit users) at the
// cost of forgetting what was known of the users dropped: a user the table
// does not hold has a view that knows nothing, so its decisions go to the
// cluster, as they do for a user never seen.
type users struct {
	lag    time.Duration // view.lag for new users
	shards [userShards]userShard
}

type userShard struct {
	mu sync.RWMutex
	m  map[ID]*user
	_  [32]byte // keep shards on separate cache lines
}

const (
	userShards     = 64
	userShardLimit = 1 << 13
)

// get returns the user of account id on r, adding it if the table does
// not hold it: its view assumes r's default limit and knows of nothing in
// flight.
func (us *users) get(id ID, r Resource) *user {
	s := &us.shards[id[0]%userShards]
	s.mu.RLock()
	u := s.m[id]
	s.mu.RUnlock()
	if u != nil {
		return u
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u = s.m[id]; u != nil {
		return u
	}
	if s.m == nil || len(s.m) >= userShardLimit {
		s.m = make(map[ID]*user, 64)
	}
	u = &user{id: id, res: r}
	u.v = view{window: uint64(r.Window), lag: uint64(us.lag), limit: r.DefaultLimit}
	s.m[id] = u
	return u
}

// forget drops what is known of account id's user.
func (us *users) forget(id ID) {
	s := &us.shards[id[0]%userShards]
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// knownLimit records that this Client set user id's limit on r to limit on
// a fresh account (fresh: nothing can be in flight yet), so that its view
// is complete.
// now is this Client's clock.
func (us *users) knownLimit(id ID, r Resource, limit uint64, fresh bool, now int64) {
	u := us.get(id, r)
	u.mu.Lock()
	u.v.limit, u.v.limitKnown = limit, true
	if fresh {
		u.v.readLocal = now // as good as a read
	} else {
		u.v.stale = true // units may be in flight that this Client did not take
	}
	u.mu.Unlock()
}
