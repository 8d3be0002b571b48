package ledger

import (
	"sync"
	"time"
)

// user is what a Client keeps of one user's limit account on one resource.
type user struct {
	mu    sync.Mutex
	id    ID // UserID(res.Ledger, key)
	res   Resource
	v     view   // u.mu
	lease *lease // u.mu; nil unless WithLeases took one
	// planning, while not nil, is closed when a change of the user's limit
	// to its plan ends (u.mu).
	planning chan struct{}
}

// users is the Client's table of users, found by resource and key (one
// lookup per decision: the account ID is derived once, when a user is
// added), in shards that are emptied when full, which bounds its memory (userShards × userShardLimit users) at the
// cost of forgetting what was known of the users dropped: a user the table
// does not hold has a view that knows nothing, so its decisions go to the
// cluster, as they do for a user never seen.
type users struct {
	lag    time.Duration // view.lag for new users
	shards [userShards]userShard
}

type userShard struct {
	mu sync.RWMutex
	m  map[userKey]*user
	_  [32]byte // keep shards on separate cache lines
}

const (
	userShards     = 64
	userShardLimit = 1 << 13
)

// userKey names a user in the table: its resource's ledger and its key,
// normalised.
type userKey struct {
	ledger uint32
	key    string
}

func (us *users) shard(k userKey) *userShard { return &us.shards[shardOf(k.ledger, k.key)%userShards] }

// get returns user key on r, adding it if the table does not hold it: its
// view assumes r's default limit and knows of nothing in flight.
func (us *users) get(r Resource, key string) *user {
	k := userKey{r.Ledger, key}
	s := us.shard(k)
	s.mu.RLock()
	u := s.m[k]
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
	if s.m == nil || len(s.m) >= userShardLimit {
		s.m = make(map[userKey]*user, 64)
	}
	u = &user{id: id, res: r}
	u.v = view{window: uint64(r.Window), lag: uint64(us.lag), limit: r.DefaultLimit}
	s.m[k] = u
	return u
}

// forget drops what is known of user key on ledger.
func (us *users) forget(ledger uint32, key string) {
	k := userKey{ledger, key}
	s := us.shard(k)
	s.mu.Lock()
	delete(s.m, k)
	s.mu.Unlock()
}

// knownLimit records that this Client set user key's limit on r to limit on
// a fresh account (fresh: nothing can be in flight yet), so that its view
// is complete.
// now is this Client's clock.
func (us *users) knownLimit(r Resource, key string, limit uint64, fresh bool, now int64) {
	u := us.get(r, key)
	u.mu.Lock()
	u.v.limit, u.v.limitKnown = limit, true
	if fresh {
		u.v.readLocal = now // as good as a read
	} else {
		u.v.stale = true // units may be in flight that this Client did not take
	}
	u.mu.Unlock()
}
