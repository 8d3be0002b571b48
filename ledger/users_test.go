package ledger

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/tblimit/tblimit/ledger/internal/view"
)

// TestUsersTable: a key is one user whether the cache in front of the
// shards finds it or not, and a user the table dropped (forgotten, or in a
// shard emptied when full) is not found again, in the cache either.
func TestUsersTable(t *testing.T) {
	r := Resource{Name: "r", Ledger: 7, Window: time.Minute, DefaultLimit: 5}
	us := users{max: 100}
	a := us.get(r, "a")
	if us.get(r, "a") != a || a.id != UserID(7, "a") || a.v.Limit() != 5 {
		t.Fatalf("get(a) twice: not one user with a's account (%v)", a.id)
	}
	if other := us.get(Resource{Name: "s", Ledger: 8, Window: time.Minute}, "a"); other == a {
		t.Fatal("one user for a key on two ledgers")
	}
	_, _, slot := us.place(userKey{7, "a"})
	slot.Store(nil) // out of the cache: found in its shard, and cached again
	if us.get(r, "a") != a || slot.Load() != a {
		t.Fatal("a user out of the cache is not found in its shard")
	}
	us.forget(7, "a")
	if b := us.get(r, "a"); b == a {
		t.Fatal("a forgotten user is still found")
	}
	// Fill a's shard until it is emptied: none of its users is found again.
	s, i, _ := us.place(userKey{7, "a"})
	var same []*user
	for n := 0; len(s.m) < us.max; n++ {
		key := fmt.Sprint("k", n)
		if _, j, _ := us.place(userKey{7, key}); j == i {
			same = append(same, us.get(r, key))
		}
	}
	us.get(r, "a2") // may land elsewhere: fill once more below
	for n := 0; ; n++ {
		key := fmt.Sprint("x", n)
		if _, j, _ := us.place(userKey{7, key}); j == i {
			us.get(r, key) // the shard is full: it is emptied first
			break
		}
	}
	for _, u := range slices.Backward(same) { // the latest first: they are the ones cached
		if us.get(r, u.key) == u {
			t.Fatalf("user %q of an emptied shard is still found", u.key)
		}
	}
}

// TestUsersTableConcurrent runs gets and forgets at once (for -race): every
// get returns a user with its key.
func TestUsersTableConcurrent(t *testing.T) {
	r := Resource{Name: "r", Ledger: 7, Window: time.Minute, DefaultLimit: 5}
	us := users{max: 4} // 300 keys in 256 places: shards are emptied too
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 20000 {
				key := fmt.Sprint("k", (n*7+g)%300)
				if u := us.get(r, key); u.key != key {
					t.Errorf("get(%q) = user %q", key, u.key)
					return
				}
				if n%50 == g {
					us.forget(7, key)
				}
			}
		}()
	}
	wg.Wait()
}

// A user's fields that every decision touches share its first two cache
// lines, and a user is 256 bytes, a size class whose objects start on a
// cache line (see user).
func TestUserLayout(t *testing.T) {
	var u user
	if n := unsafe.Sizeof(u); n != 256 {
		t.Errorf("a user is %d bytes, want 256", n)
	}
	base := uintptr(unsafe.Pointer(&u))
	for name, p := range map[string]unsafe.Pointer{
		"mu": unsafe.Pointer(&u.mu), "denial": unsafe.Pointer(&u.denial), "id": unsafe.Pointer(&u.id),
	} {
		if off := uintptr(p) - base; off >= 128 {
			t.Errorf("user field %s at byte %d, beyond the first two cache lines", name, off)
		}
	}
	// The view's hot fields end within view.HotBytes of its start (its
	// own test checks that).
	if end := unsafe.Offsetof(u.v) + view.HotBytes; end > 128 {
		t.Errorf("a user's view's hot fields may end at byte %d, beyond the first two cache lines", end)
	}
}
