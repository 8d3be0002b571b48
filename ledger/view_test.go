package ledger

import (
	"math"
	"slices"
	"testing"
	"time"
)

const sec = uint64(time.Second)

// testView is a complete view of a fresh account: limit 10, window 10s.
func testView(lag time.Duration) view {
	return view{window: 10 * sec, lag: uint64(lag), limit: 10, limitKnown: true}
}

func id(n byte) ID { return ID{n} }

func TestViewCountsItsOwnHolds(t *testing.T) {
	v := testView(0)
	v.took(id(1), 3, 10*sec)
	v.took(id(2), 4, 12*sec)
	v.took(id(2), 4, 12*sec) // a retry of an applied attempt: the same hold
	for _, step := range []struct {
		at               uint64
		avail, inFlight  uint64
		retry4, reset    time.Duration
		retry11, retry3n time.Duration
	}{
		{at: 1 * sec, avail: 3, inFlight: 7, retry4: 9 * time.Second, reset: 11 * time.Second, retry11: -1},
		{at: 10 * sec, avail: 6, inFlight: 4, retry4: 0, reset: 2 * time.Second, retry11: -1},
		{at: 12 * sec, avail: 10, inFlight: 0, retry4: 0, reset: 0, retry11: -1},
	} {
		if got := v.available(step.at); got != step.avail {
			t.Errorf("available(%v) = %d, want %d", step.at, got, step.avail)
		}
		if got := v.inFlight(step.at); got != step.inFlight {
			t.Errorf("inFlight(%v) = %d, want %d", step.at, got, step.inFlight)
		}
		if got := localDenial(&v, 4, step.at).RetryAfter; got != step.retry4 {
			t.Errorf("retryAfter(4, %v) = %v, want %v", step.at, got, step.retry4)
		}
		if got := localDenial(&v, 11, step.at).RetryAfter; got != step.retry11 {
			t.Errorf("retryAfter(11, %v) = %v, want %v (more than the limit)", step.at, got, step.retry11)
		}
		if got := localDenial(&v, 0, step.at).ResetAfter; got != step.reset {
			t.Errorf("resetAfter(%v) = %v, want %v", step.at, got, step.reset)
		}
	}
}

// TestViewHoldsOutOfOrder: a hold returning before others already known
// (a shorter re-hold) goes in its place, and the echo of a hold known
// already is not counted again, even behind later holds.
func TestViewHoldsOutOfOrder(t *testing.T) {
	v := testView(0)
	v.took(id(1), 1, 10*sec)
	v.took(id(2), 2, 12*sec)
	v.took(id(3), 3, 11*sec) // returns before the last one
	v.took(id(1), 1, 10*sec) // an echo behind two later holds
	v.took(id(2), 2, 12*sec) // an echo of the last one
	v.scanned([]flight{{id: id(4), amount: 1, expires: 20 * sec}, {id: id(5), amount: 1, expires: 15 * sec}}, 1*sec)
	v.took(id(6), 1, 16*sec) // between two scanned holds
	v.took(id(4), 1, 20*sec) // an echo of a scanned hold
	v.took(id(7), 1, 21*sec)
	var got []uint64
	for _, h := range v.holds {
		got = append(got, h.expires/sec)
	}
	if want := []uint64{15, 16, 20, 21}; !slices.Equal(got, want) {
		t.Errorf("holds return at %v s, want %v", got, want)
	}
	if v.held != 4 {
		t.Errorf("held %d, want 4", v.held)
	}
	v = testView(0)
	v.took(id(1), 1, 10*sec)
	v.took(id(2), 2, 12*sec)
	v.took(id(3), 3, 11*sec)
	v.took(id(1), 1, 10*sec)
	if got, want := v.available(1*sec), uint64(10-6); got != want || v.next != 10*sec {
		t.Errorf("available %d, want %d; next %v", got, want, v.next)
	}
	if got := v.available(11 * sec); got != 10-2 {
		t.Errorf("at 11s: available %d, want 8", got)
	}
}

// TestViewKnowsItsLastReturn: whatever changes the holds, the view's
// record of when the last one returns (which ResetAfter says) stays true.
func TestViewKnowsItsLastReturn(t *testing.T) {
	v := testView(0)
	check := func(step string, want time.Duration) {
		t.Helper()
		top := uint64(0)
		if n := len(v.holds); n > 0 {
			top = v.holds[n-1].expires
		}
		if v.top != top {
			t.Errorf("%s: top %v, want %v", step, v.top, top)
		}
		if got := localDenial(&v, 0, 1*sec).ResetAfter; got != want {
			t.Errorf("%s: resetAfter %v, want %v", step, got, want)
		}
	}
	v.took(id(1), 1, 10*sec)
	v.took(id(2), 1, 12*sec)
	v.took(id(3), 1, 11*sec)
	check("three holds", 11*time.Second)
	v.ended(id(2), 0)
	check("the last one voided", 10*time.Second)
	v.ended(id(3), math.MaxUint64)
	check("the last one posted", 9*time.Second)
	v.ended(id(1), 0)
	check("none left", 0)
	v.took(id(4), 1, 5*sec)
	check("a new hold", 4*time.Second)
	v.prune(6 * sec)
	check("returned", 0)
	v.scanned([]flight{{id: id(5), amount: 1, expires: 20 * sec}, {id: id(6), amount: 1, expires: 15 * sec}}, 7*sec)
	check("scanned", 19*time.Second)
	for i := range maxHolds + 1 {
		v.took(ID{7, byte(i), byte(i >> 8)}, 1, 30*sec+uint64(i))
	}
	check("compacted", 29*time.Second+maxHolds) // 1,027 holds: the last is left alone
}

func TestViewEndedHolds(t *testing.T) {
	v := testView(0)
	v.took(id(1), 3, 10*sec)
	v.took(id(2), 4, 10*sec)
	v.ended(id(1), 0) // voided: back at once
	if got := v.available(sec); got != 6 {
		t.Fatalf("after a void: available %d, want 6", got)
	}
	v.ended(id(2), math.MaxUint64) // posted: spent for good
	if v.limit != 6 || v.available(sec) != 6 {
		t.Fatalf("after a post: limit %d, available %d; want 6, 6", v.limit, v.available(sec))
	}
	v.took(id(3), 4, 10*sec)
	v.ended(id(3), 1) // 1 posted: spent for good, 3 back
	if v.limit != 5 || v.available(sec) != 5 {
		t.Fatalf("after a post of 1 of 4: limit %d, available %d; want 5, 5", v.limit, v.available(sec))
	}
	v.ended(id(9), 0) // unknown (returned already): nothing
	if got := v.available(sec); got != 5 {
		t.Fatalf("after ending an unknown hold: available %d, want 5", got)
	}
}

// A user is denied locally only after the cluster confirmed a denial the
// view predicted, for at most recheck, and only while nothing returned.
func TestViewDeniesLocallyOnlyWhenConfirmed(t *testing.T) {
	v := testView(0)
	v.took(id(1), 10, 10*sec)
	now := int64(1000)
	if v.deny(1, sec, now) {
		t.Fatal("denied locally before the cluster confirmed the view")
	}
	v.denied(1, sec, now) // predicted: confirms
	if v.stale || !v.deny(1, 2*sec, now+1) {
		t.Fatalf("after a predicted denial: stale %v, deny %v; want a local denial", v.stale, v.deny(1, 2*sec, now+1))
	}
	if v.deny(1, 2*sec, now+int64(recheck)) {
		t.Fatal("denied locally past recheck")
	}
	if v.deny(1, 10*sec, now+1) {
		t.Fatal("denied locally after the units returned")
	}
}

// A denial the view did not predict means units it does not know of: the
// view is stale (no local denials) and counts them as unknown until a read.
func TestViewUnpredictedDenial(t *testing.T) {
	v := testView(0)
	v.took(id(1), 2, 10*sec)
	v.denied(1, sec, 1) // the view says 8 available
	if !v.stale || v.complete() {
		t.Fatal("an unpredicted denial left the view complete")
	}
	if got := v.available(sec); got != 0 {
		t.Fatalf("available after an unpredicted denial of 1 = %d, want 0", got)
	}
	if v.deny(1, sec, 2) {
		t.Fatal("a stale view denies locally")
	}
	// The view's own hold returns at 10s; the unknown units surely by a
	// window (and a second for re-holds) after the denial.
	if got := localDenial(&v, 1, sec).RetryAfter; got != 9*time.Second {
		t.Fatalf("retryAfter(1) = %v, want 9s (its own hold)", got)
	}
	if got := localDenial(&v, 3, sec).RetryAfter; got != 11*time.Second {
		t.Fatalf("retryAfter(3) = %v, want 11s (the unknown units too)", got)
	}
	// A read fixes it: 5 in flight, 2 of them ours.
	v.read(10, 5, sec, 0)
	if v.stale || v.unknown != 3 || v.available(sec) != 5 {
		t.Fatalf("after a read: stale %v, unknown %d, available %d; want false, 3, 5", v.stale, v.unknown, v.available(sec))
	}
	if v.complete() {
		t.Fatal("complete with units of unknown return")
	}
	if got := v.available(12 * sec); got != 10 {
		t.Fatalf("available a window and a second after the read = %d, want 10 (the unknown units returned)", got)
	}
}

// On a cluster that frees returned holds late, a denial just after a hold
// returned does not make the view stale.
func TestViewReturnLag(t *testing.T) {
	v := testView(returnLag)
	v.took(id(1), 10, 10*sec)
	v.denied(1, 10*sec+sec/10, 1)
	if v.stale || v.checked != 0 {
		t.Fatalf("a denial 100ms after the return: stale %v, checked %d; want neither", v.stale, v.checked)
	}
	// A read that close to the return may still count the hold.
	v = testView(returnLag)
	v.took(id(1), 4, 10*sec)
	v.read(10, 4, 10*sec+sec/10, 0)
	if v.stale || v.unknown != 0 {
		t.Fatalf("a read 100ms after a return that still counts it: stale %v, unknown %d", v.stale, v.unknown)
	}
}

func TestViewReads(t *testing.T) {
	for _, tc := range []struct {
		name           string
		pending        uint64
		stale          bool
		unknown, avail uint64
	}{
		{"all ours", 7, false, 0, 3},
		{"others hold 2", 9, false, 2, 1},
		{"one of ours ended elsewhere", 3, true, 0, 3},
	} {
		v := testView(0)
		v.took(id(1), 3, 10*sec)
		v.took(id(2), 4, 12*sec)
		v.read(10, tc.pending, sec, 0)
		if v.stale != tc.stale || v.unknown != tc.unknown || v.available(sec) != tc.avail {
			t.Errorf("%s: stale %v, unknown %d, available %d; want %v, %d, %d", tc.name, v.stale, v.unknown, v.available(sec), tc.stale, tc.unknown, tc.avail)
		}
	}
	// A limit read differs from the one assumed.
	v := view{window: 10 * sec, limit: 10}
	v.read(3, 0, sec, 0)
	if !v.complete() || v.available(sec) != 3 {
		t.Fatalf("after reading limit 3: complete %v, available %d", v.complete(), v.available(sec))
	}
}

// Units that came back or a limit raised elsewhere show as an admission the
// view did not predict.
func TestViewUnpredictedAdmission(t *testing.T) {
	v := testView(0)
	v.took(id(1), 10, 10*sec)
	v.admitted(1, sec)
	if !v.stale {
		t.Fatal("an admission the view said could not fit left it trusted")
	}
}

// A scan makes the view complete, with every hold's return known.
func TestViewScanned(t *testing.T) {
	v := testView(0)
	v.denied(1, sec, 1) // unknown units
	v.scanned([]flight{{id: id(5), amount: 6, expires: 5 * sec}, {id: id(6), amount: 4, expires: 3 * sec}}, sec)
	if !v.complete() || v.available(sec) != 0 || localDenial(&v, 4, sec).RetryAfter != 2*time.Second || localDenial(&v, 5, sec).RetryAfter != 4*time.Second {
		t.Fatalf("after a scan: complete %v, available %d, retryAfter(4) %v, retryAfter(5) %v",
			v.complete(), v.available(sec), localDenial(&v, 4, sec).RetryAfter, localDenial(&v, 5, sec).RetryAfter)
	}
}

// A view keeps at most maxHolds holds: beyond, neighbours merge, returning
// at the earlier instant (never later than the units really return).
func TestViewBoundsItsHolds(t *testing.T) {
	v := view{window: 100 * sec, limit: 1 << 20, limitKnown: true}
	const n = 5 * maxHolds
	for i := range n {
		v.took(ID{byte(i), byte(i >> 8)}, 1, 100*sec+uint64(i)*1000)
	}
	if len(v.holds) > maxHolds || v.held != n {
		t.Fatalf("%d holds of %d units kept, want at most %d holding all %d", len(v.holds), v.held, maxHolds, n)
	}
	if v.slack == 0 || v.slack > n*1000/maxHolds*64 {
		t.Fatalf("slack %d, want a few dozen gaps between neighbours at most", v.slack)
	}
	// Every unit is back by its own instant, and counted until at least
	// slack before it.
	for _, at := range []uint64{100*sec + 1000*1000, 100*sec + 3000*1000} {
		trueBack := (at-100*sec)/1000 + 1
		back := n - v.inFlight(at)
		if back < trueBack || back > trueBack+v.slack/1000+1 {
			t.Fatalf("at %d: %d back, truly %d (slack %d)", at, back, trueBack, v.slack)
		}
	}
}

// A merged hold keeps one ID. The end of a transfer it merged, or a retry's
// echo of one, cannot be matched to its units: the view then denies nothing
// on its own word until a read, and never counts fewer units in flight than
// there are. What it can match stays exact.
func TestViewMergedHoldsGoStale(t *testing.T) {
	fill := func() (view, []ID) {
		v := view{window: 1 << 40, limit: 1 << 20, limitKnown: true}
		ids := make([]ID, maxHolds+1)
		for i := range ids {
			ids[i] = NewID()
			v.took(ids[i], 1, uint64(1000+i)) // the last one compacts: pairs merge
		}
		if !v.complete() || v.inFlight(0) != maxHolds+1 {
			t.Fatalf("after %d holds: complete %v, %d in flight", len(ids), v.complete(), v.inFlight(0))
		}
		return v, ids
	}
	v, ids := fill()
	v.took(NewID(), 1, 5000) // a new hold, after every merged one
	v.ended(ids[maxHolds], 0)
	if !v.complete() || v.inFlight(0) != maxHolds+1 {
		t.Fatalf("a new hold and the end of an unmerged one: complete %v, %d in flight, want %d", v.complete(), v.inFlight(0), maxHolds+1)
	}

	for _, c := range []struct {
		name string
		do   func(v *view, ids []ID)
	}{
		{"the end of a merged-away hold", func(v *view, ids []ID) { v.ended(ids[1], 0) }},
		{"the end of a merged hold's first", func(v *view, ids []ID) { v.ended(ids[0], math.MaxUint64) }},
		{"a retry's echo of a merged-away hold", func(v *view, ids []ID) { v.took(ids[1], 1, 1001) }},
	} {
		v, ids := fill()
		c.do(&v, ids)
		if v.complete() || v.inFlight(0) < maxHolds {
			t.Errorf("%s: complete %v, %d in flight; want stale, at least %d", c.name, v.complete(), v.inFlight(0), maxHolds)
		}
	}
}

// drained returns a user whose view holds all of its limit, 4 units
// returning at 10 s and 6 at 12 s, and whose denial the cluster confirmed
// at local time now.
func drained(now int64) *user {
	u := &user{v: testView(0)}
	u.v.took(id(1), 4, 10*sec)
	u.v.took(id(2), 6, 12*sec)
	u.v.checked = now
	return u
}

// publish has u's view deny 1 unit at now (as cluster and local time) and
// publishes that denial, for a call to a lease (leased) or not.
func publish(t *testing.T, u *user, now int64, leased bool) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.v.deny(1, uint64(now), now) {
		t.Fatal("a drained view does not deny")
	}
	u.publishDenial(1, uint64(now), now, leased)
}

// TestPublishedDenial: a denial published under the user's lock says, at
// every instant it holds, what the view itself would say then; it stops at
// the first return and at the recheck, and whoever changes the user clears
// it.
func TestPublishedDenial(t *testing.T) {
	now := int64(1 * sec)
	t0 := uint64(now)
	u := drained(now)
	publish(t, u, now, false)
	dn := u.denial.Load()
	if dn == nil {
		t.Fatal("no denial published")
	}
	for _, at := range []uint64{t0, t0 + sec/2, t0 + sec - 1} {
		got, ok := dn.decision(1, at, int64(at))
		if want := localDenial(&u.v, 1, at); !ok || got != want {
			t.Errorf("at %v: %+v %v, want %+v", at, got, ok, want)
		}
	}
	for _, c := range []struct {
		amount uint64
		at     uint64
		now    int64
	}{
		{2, t0, now},                       // another amount
		{1, 10 * sec, now},                 // the first hold has returned
		{1, t0 + sec, int64(t0 + sec)},     // time to ask the cluster again
		{1, 5 * sec, now + int64(recheck)}, // likewise, by this Client's clock
	} {
		if d, ok := dn.decision(c.amount, c.at, c.now); ok {
			t.Errorf("%+v: %+v, want no decision", c, d)
		}
	}
	u.lock()
	u.mu.Unlock()
	if u.denial.Load() != nil {
		t.Error("a change left the denial published")
	}

	// A denial for a call to a lease counts what the calls it denies ask,
	// and the lease's demand takes it in when the denial is withdrawn,
	// whether by a change or by a denial published in its place.
	u.lease = &lease{demand: 1}
	for _, replace := range []func(){
		func() { u.lock(); u.mu.Unlock() },
		func() { publish(t, u, now, false) },
	} {
		u.lease.demand = 1
		publish(t, u, now, true)
		dn := u.denial.Load()
		if dn == nil || dn.asked == nil {
			t.Fatalf("leased denial published as %+v, want one that counts demand", dn)
		}
		dn.asked.add(2)
		dn.asked.add(3)
		replace()
		if u.lease.demand != 6 {
			t.Errorf("lease demand %d after the denial was withdrawn, want 1+2+3", u.lease.demand)
		}
	}
}
