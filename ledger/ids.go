package ledger

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// ID is a TigerBeetle object ID (128 bits), shown as 32 hex digits.
type ID [16]byte

// String returns the ID as 32 lowercase hex digits, most significant first.
func (id ID) String() string {
	var b [16]byte
	for i := range 16 {
		b[i] = id[15-i]
	}
	return hex.EncodeToString(b[:])
}

// IsZero reports whether id is the zero ID (meaning "none").
func (id ID) IsZero() bool { return id == ID{} }

// ParseID parses the form String returns (up to 32 hex digits).
func ParseID(s string) (ID, error) {
	if len(s) == 0 || len(s) > 32 {
		return ID{}, fmt.Errorf("%w: ID %q must be 1 to 32 hex digits", ErrInvalidID, s)
	}
	if len(s)%2 == 1 {
		s = "0" + s
	}
	raw, err := hex.DecodeString(s)
	if err != nil {
		return ID{}, fmt.Errorf("%w: ID %q is not hex", ErrInvalidID, s)
	}
	var id ID
	for i, b := range raw {
		id[len(raw)-1-i] = b
	}
	return id, nil
}

// KeyID derives the ID of a request from a business key (an order or
// payment number, an idempotency key a client sent): the same key always
// gives the same ID, in every process. See Request.ID.
func KeyID(key string) ID { return derive(roleBusinessKey, 0, key) }

// NewID returns a new unique, time-ordered ID, the kind TigerBeetle
// recommends for transfers: the time in milliseconds in the top 48 bits, as
// tb.ID does, then 80 bits that are random per process and counted up per
// ID, without the lock tb.ID takes.
func NewID() ID {
	var id ID
	ms := uint64(time.Now().UnixMilli())
	binary.LittleEndian.PutUint64(id[:8], idSeq.Add(1))
	binary.LittleEndian.PutUint16(id[8:10], idTag)
	binary.LittleEndian.PutUint16(id[10:12], uint16(ms))
	binary.LittleEndian.PutUint32(id[12:16], uint32(ms>>16))
	return id
}

var (
	idSeq atomic.Uint64
	idTag uint16
)

func init() {
	var seed [10]byte
	if _, err := rand.Read(seed[:]); err != nil {
		panic("ledger: no randomness for IDs: " + err.Error())
	}
	idSeq.Store(binary.LittleEndian.Uint64(seed[:8]))
	idTag = binary.LittleEndian.Uint16(seed[8:])
}

func (id ID) tb() tb.Uint128 { return tb.BytesToUint128(id) }

func fromTB(u tb.Uint128) ID { return ID(u.Bytes()) }

// Account codes. The operator code also records the resource's kind and
// whether it provisions lazily: code = codeOperator + 10*kind + lazy.
const (
	codeOperator         = 1000
	codeUser             = 2000
	codeCurrencyOperator = 3000
	codeCurrencyUser     = 3001
	codeMarkers          = 4000 // the accounts key markers move nothing between
	codeKeyName          = 4001 // a part of a key too long for its user account (see nameAccounts)
)

// Transfer codes: what every transfer written by this package is for, so
// that an account's transfers read as an audit trail.
const (
	codeProvision  = 1  // operator -> user: the first limit
	codeRaise      = 2  // operator -> user: a limit raised
	codeLower      = 3  // user -> operator, posted balancing debit: a limit lowered
	codeLowerPost  = 4  // post of an in-flight unit: a limit lowered while busy
	codeRefund     = 5  // operator -> user: what posting an in-flight unit took too much
	codeRefundLock = 6  // user -> operator, pending: holds that refund until its unit would have returned
	codeAcquire    = 10 // user -> operator, pending: units admitted
	codePayHold    = 20 // user -> operator, pending, linked: a payment's hold on its money limit
	codePayment    = 21 // user -> destination on the currency ledger
	codeFund       = 22 // currency operator -> user
	codeKeyMarker  = 11 // user -> operator, nothing: a request's ID was admitted (see pipeline.NewAttempt)
	codeCarry      = 12 // user -> operator, pending: units in flight on another resource, carried over (see Migrate)
	codeKept       = 13 // user -> operator, pending: what a committed reservation keeps until its window ends
	codeReserve    = 14 // user -> operator, pending: units a Reservation holds until Commit or Cancel
)

// Roles keep the derived IDs of different purposes apart.
const (
	roleOperator byte = iota + 1
	roleUser
	roleCurrencyOperator
	roleCurrencyUser
	roleProvision
	roleLimitChange
	roleLowerPost
	roleRefund
	roleRefundLock
	rolePayment
	roleCommit
	roleCancel
	roleKeyMarker
	roleBusinessKey
	roleKeyRequest
	roleMarkerAccount
	roleKeyName
	roleCarry
	roleKept
)

// derive returns a deterministic ID for (role, ledger, key): the first 16
// bytes of SHA-256 over a versioned domain, so every process finds the same
// account for the same key, and crafted keys cannot collide with others.
func derive(role byte, ledger uint32, key string) ID {
	h := sha256.New()
	var head [len("tblimit/v1/") + 5]byte
	copy(head[:], "tblimit/v1/")
	head[11] = role
	binary.LittleEndian.PutUint32(head[12:], ledger)
	h.Write(head[:])
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	var id ID
	copy(id[:], sum[:16])
	if id == (ID{}) || id == maxID {
		id[0] ^= 1 // 0 and 2^128-1 are reserved by TigerBeetle.
	}
	return id
}

var maxID = ID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// OperatorID is the ID of a resource's operator account on ledger.
func OperatorID(ledger uint32) ID {
	if m := operators.Load(); m != nil {
		if id, ok := (*m)[ledger]; ok {
			return id
		}
	}
	id := derive(roleOperator, ledger, "")
	operatorsMu.Lock()
	old := operators.Load()
	m := make(map[uint32]ID, 1)
	if old != nil && len(*old) < 1<<12 {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[ledger] = id
	operators.Store(&m)
	operatorsMu.Unlock()
	return id
}

// operators caches operator IDs by ledger: few ledgers, read on every
// decision, so a copy-on-write map read without any lock.
var (
	operators   atomic.Pointer[map[uint32]ID]
	operatorsMu sync.Mutex
)

// UserID is the ID of user key's limit account on ledger.
func UserID(ledger uint32, key string) ID { return cached(roleUser, ledger, key) }

// idCache remembers the account IDs derived lately: a map lookup instead of
// a SHA-256 when one request asks for a key's ID more than once (a user
// added to a Client's table, then provisioned; a batch of users
// provisioned). A decision does not ask: the Client's table of users holds
// each one's ID. It holds one keyCache per (role, ledger), found without
// any lock; each is split in shards that are emptied when full, which bounds
// their memory (idShards × idShardLimit IDs each, about 1 MB) at the cost
// of hashing again (measured: 4,096 a shard made it 15 MB, a tenth of a
// process's live heap when every key is new, for no decision faster).
var (
	idCaches   atomic.Pointer[map[uint64]*keyCache]
	idCachesMu sync.Mutex
)

type keyCache [idShards]idShard

type idShard struct {
	mu sync.RWMutex
	m  map[string]ID
	_  [32]byte // keep shards on separate cache lines
}

const (
	idShards     = 64
	idShardLimit = 1 << 8
)

func cached(role byte, ledger uint32, key string) ID {
	kc := keyCacheOf(uint64(ledger)<<8 | uint64(role))
	s := &kc[shardOf(ledger, key)]
	s.mu.RLock()
	id, ok := s.m[key]
	s.mu.RUnlock()
	if ok {
		return id
	}
	id = derive(role, ledger, key)
	s.mu.Lock()
	if s.m == nil || len(s.m) >= idShardLimit {
		s.m = make(map[string]ID, 64)
	}
	s.m[key] = id
	s.mu.Unlock()
	return id
}

// keyCacheOf returns the cache of one (role, ledger), creating it once.
func keyCacheOf(k uint64) *keyCache {
	if m := idCaches.Load(); m != nil {
		if kc, ok := (*m)[k]; ok {
			return kc
		}
	}
	idCachesMu.Lock()
	defer idCachesMu.Unlock()
	old := idCaches.Load()
	if old != nil {
		if kc, ok := (*old)[k]; ok {
			return kc
		}
	}
	m := make(map[uint64]*keyCache, 1)
	if old != nil && len(*old) < 1<<10 { // beyond that many ledgers, start afresh
		for k, v := range *old {
			m[k] = v
		}
	}
	kc := new(keyCache)
	m[k] = kc
	idCaches.Store(&m)
	return kc
}

// shardOf spreads keys over the shards.
func shardOf(ledger uint32, key string) uint32 { return keyHash(ledger, key) % idShards }

// keyHash is FNV-1a of a key on a ledger: not a security boundary, a
// crafted key only lands in a busier shard or cache slot.
func keyHash(ledger uint32, key string) uint32 {
	h := uint32(2166136261) ^ ledger
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return h
}

// CurrencyOperatorID is the ID of the account that funds users on a currency ledger.
func CurrencyOperatorID(currency uint32) ID { return derive(roleCurrencyOperator, currency, "") }

// CurrencyUserID is the ID of user key's account on a currency ledger.
func CurrencyUserID(currency uint32, key string) ID { return derive(roleCurrencyUser, currency, key) }

// stateID derives the ID of a limit change from the account's posted balance
// when the change was computed. It works as a compare-and-set: two changes
// computed from the same balance (concurrent SetLimit calls, or a retry) get
// the same ID, so TigerBeetle applies only the first and the other sees
// exists or exists_with_different_* and looks again, while any later change
// starts from a different balance and gets a fresh ID. attempt counts the
// IDs of this balance that TigerBeetle refused (id_already_failed).
func stateID(account ID, credits, debits tb.Uint128, attempt uint64) ID {
	var buf [16 + 16 + 16 + 8]byte
	copy(buf[:16], account[:])
	c := credits.Bytes()
	d := debits.Bytes()
	copy(buf[16:32], c[:])
	copy(buf[32:48], d[:])
	binary.LittleEndian.PutUint64(buf[48:], attempt)
	return derive(roleLimitChange, 0, string(buf[:]))
}

// resolutionIDs are the IDs of every transfer this package may send to end
// hold id: Reservation.Commit, the voids (Reservation.Cancel, Reset, and a
// lease's give-back of what it did not use) and SetLimit's post.
func resolutionIDs(id ID) [3]ID {
	return [3]ID{endID(roleCommit, id), endID(roleCancel, id), endID(roleLowerPost, id)}
}

// endID is the ID of the transfer that ends hold id in role (roleCommit,
// roleCancel or roleLowerPost): derived, so that a retry is applied once
// and readFlights can find it.
func endID(role byte, hold ID) ID { return derive(role, 0, string(hold[:])) }

// keptID is the ID of the hold that keeps what a commit of reservation hold
// kept, until the reservation's window ends: derived, so that a retry of the
// commit finds it.
func keptID(hold ID) ID { return derive(roleKept, 0, string(hold[:])) }

// provisionID is the ID of the transfer that credits user key's limit on
// ledger: derived, so that provisioning is applied once however many
// processes provision the user at once.
func provisionID(ledger uint32, key string) ID { return derive(roleProvision, ledger, key) }
