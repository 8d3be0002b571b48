package view

import (
	"math"
	"slices"
	"testing"
	"time"
	"unsafe"
)

const sec = uint64(time.Second)

// testView is a complete view of a fresh account: limit 10, window 10s.
func testView(lag time.Duration) View {
	return View{window: 10 * sec, lag: uint64(lag), limit: 10, limitKnown: true}
}

func id(n byte) ID { return ID{n} }

func TestViewCountsItsOwnHolds(t *testing.T) {
	v := testView(0)
	v.Took(id(1), 3, 10*sec)
	v.Took(id(2), 4, 12*sec)
	v.Took(id(2), 4, 12*sec) // a retry of an applied attempt: the same hold
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
		if got := v.Available(step.at); got != step.avail {
			t.Errorf("available(%v) = %d, want %d", step.at, got, step.avail)
		}
		if got := v.InFlight(step.at); got != step.inFlight {
			t.Errorf("inFlight(%v) = %d, want %d", step.at, got, step.inFlight)
		}
		if got := v.DenialReport(4, step.at).RetryAfter(step.at); got != step.retry4 {
			t.Errorf("retryAfter(4, %v) = %v, want %v", step.at, got, step.retry4)
		}
		if got := v.DenialReport(11, step.at).RetryAfter(step.at); got != step.retry11 {
			t.Errorf("retryAfter(11, %v) = %v, want %v (more than the limit)", step.at, got, step.retry11)
		}
		if got := v.DenialReport(0, step.at).ResetAfter(step.at); got != step.reset {
			t.Errorf("resetAfter(%v) = %v, want %v", step.at, got, step.reset)
		}
	}
}

// TestViewHoldsOutOfOrder: a hold returning before others already known
// (a shorter re-hold) goes in its place, and the echo of a hold known
// already is not counted again, even behind later holds.
func TestViewHoldsOutOfOrder(t *testing.T) {
	v := testView(0)
	v.Took(id(1), 1, 10*sec)
	v.Took(id(2), 2, 12*sec)
	v.Took(id(3), 3, 11*sec) // returns before the last one
	v.Took(id(1), 1, 10*sec) // an echo behind two later holds
	v.Took(id(2), 2, 12*sec) // an echo of the last one
	v.Scanned([]Hold{{ID: id(4), Amount: 1, Expires: 20 * sec}, {ID: id(5), Amount: 1, Expires: 15 * sec}}, 1*sec)
	v.Took(id(6), 1, 16*sec) // between two scanned holds
	v.Took(id(4), 1, 20*sec) // an echo of a scanned hold
	v.Took(id(7), 1, 21*sec)
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
	v.Took(id(1), 1, 10*sec)
	v.Took(id(2), 2, 12*sec)
	v.Took(id(3), 3, 11*sec)
	v.Took(id(1), 1, 10*sec)
	if got, want := v.Available(1*sec), uint64(10-6); got != want || v.next != 10*sec {
		t.Errorf("available %d, want %d; next %v", got, want, v.next)
	}
	if got := v.Available(11 * sec); got != 10-2 {
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
		if got := v.DenialReport(0, 1*sec).ResetAfter(1 * sec); got != want {
			t.Errorf("%s: resetAfter %v, want %v", step, got, want)
		}
	}
	v.Took(id(1), 1, 10*sec)
	v.Took(id(2), 1, 12*sec)
	v.Took(id(3), 1, 11*sec)
	check("three holds", 11*time.Second)
	v.Ended(id(2), 0)
	check("the last one voided", 10*time.Second)
	v.Ended(id(3), math.MaxUint64)
	check("the last one posted", 9*time.Second)
	v.Ended(id(1), 0)
	check("none left", 0)
	v.Took(id(4), 1, 5*sec)
	check("a new hold", 4*time.Second)
	v.prune(6 * sec)
	check("returned", 0)
	v.Scanned([]Hold{{ID: id(5), Amount: 1, Expires: 20 * sec}, {ID: id(6), Amount: 1, Expires: 15 * sec}}, 7*sec)
	check("scanned", 19*time.Second)
	for i := range maxHolds + 1 {
		v.Took(ID{7, byte(i), byte(i >> 8)}, 1, 30*sec+uint64(i))
	}
	check("compacted", 29*time.Second+maxHolds) // 1,027 holds: the last is left alone
}

func TestViewEndedHolds(t *testing.T) {
	v := testView(0)
	v.Took(id(1), 3, 10*sec)
	v.Took(id(2), 4, 10*sec)
	v.Ended(id(1), 0) // voided: back at once
	if got := v.Available(sec); got != 6 {
		t.Fatalf("after a void: available %d, want 6", got)
	}
	v.Ended(id(2), math.MaxUint64) // posted: spent for good
	if v.limit != 6 || v.Available(sec) != 6 {
		t.Fatalf("after a post: limit %d, available %d; want 6, 6", v.limit, v.Available(sec))
	}
	v.Took(id(3), 4, 10*sec)
	v.Ended(id(3), 1) // 1 posted: spent for good, 3 back
	if v.limit != 5 || v.Available(sec) != 5 {
		t.Fatalf("after a post of 1 of 4: limit %d, available %d; want 5, 5", v.limit, v.Available(sec))
	}
	v.Ended(id(9), 0) // unknown (returned already): nothing
	if got := v.Available(sec); got != 5 {
		t.Fatalf("after ending an unknown hold: available %d, want 5", got)
	}
}

// A user is denied locally only after the cluster confirmed a denial the
// view predicted, for at most Recheck, and only while nothing returned.
func TestViewDeniesLocallyOnlyWhenConfirmed(t *testing.T) {
	v := testView(0)
	v.Took(id(1), 10, 10*sec)
	now := int64(1000)
	if v.Deny(1, sec, now) {
		t.Fatal("denied locally before the cluster confirmed the view")
	}
	v.Denied(1, sec, now) // predicted: confirms
	if v.stale || !v.Deny(1, 2*sec, now+1) {
		t.Fatalf("after a predicted denial: stale %v, deny %v; want a local denial", v.stale, v.Deny(1, 2*sec, now+1))
	}
	if v.Deny(1, 2*sec, now+int64(Recheck)) {
		t.Fatal("denied locally past Recheck")
	}
	if v.Deny(1, 10*sec, now+1) {
		t.Fatal("denied locally after the units returned")
	}
}

// A denial the view did not predict means units it does not know of: the
// view is stale (no local denials) and counts them as unknown until a read.
func TestViewUnpredictedDenial(t *testing.T) {
	v := testView(0)
	v.Took(id(1), 2, 10*sec)
	v.Denied(1, sec, 1) // the view says 8 available
	if !v.stale || v.Complete() {
		t.Fatal("an unpredicted denial left the view complete")
	}
	if got := v.Available(sec); got != 0 {
		t.Fatalf("available after an unpredicted denial of 1 = %d, want 0", got)
	}
	if v.Deny(1, sec, 2) {
		t.Fatal("a stale view denies locally")
	}
	// The view's own hold returns at 10s; the unknown units surely by a
	// window (and a second for re-holds) after the denial.
	if got := v.DenialReport(1, sec).RetryAfter(sec); got != 9*time.Second {
		t.Fatalf("retryAfter(1) = %v, want 9s (its own hold)", got)
	}
	if got := v.DenialReport(3, sec).RetryAfter(sec); got != 11*time.Second {
		t.Fatalf("retryAfter(3) = %v, want 11s (the unknown units too)", got)
	}
	// A read fixes it: 5 in flight, 2 of them ours.
	v.Read(10, 5, sec, 0)
	if v.stale || v.unknown != 3 || v.Available(sec) != 5 {
		t.Fatalf("after a read: stale %v, unknown %d, available %d; want false, 3, 5", v.stale, v.unknown, v.Available(sec))
	}
	if v.Complete() {
		t.Fatal("complete with units of unknown return")
	}
	if got := v.Available(12 * sec); got != 10 {
		t.Fatalf("available a window and a second after the read = %d, want 10 (the unknown units returned)", got)
	}
}

// On a cluster that frees returned holds late, a denial just after a hold
// returned does not make the view stale.
func TestViewReturnLag(t *testing.T) {
	v := testView(ReturnLag)
	v.Took(id(1), 10, 10*sec)
	v.Denied(1, 10*sec+sec/10, 1)
	if v.stale || v.checked != 0 {
		t.Fatalf("a denial 100ms after the return: stale %v, checked %d; want neither", v.stale, v.checked)
	}
	// A read that close to the return may still count the hold.
	v = testView(ReturnLag)
	v.Took(id(1), 4, 10*sec)
	v.Read(10, 4, 10*sec+sec/10, 0)
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
		v.Took(id(1), 3, 10*sec)
		v.Took(id(2), 4, 12*sec)
		v.Read(10, tc.pending, sec, 0)
		if v.stale != tc.stale || v.unknown != tc.unknown || v.Available(sec) != tc.avail {
			t.Errorf("%s: stale %v, unknown %d, available %d; want %v, %d, %d", tc.name, v.stale, v.unknown, v.Available(sec), tc.stale, tc.unknown, tc.avail)
		}
	}
	// A limit read differs from the one assumed.
	v := View{window: 10 * sec, limit: 10}
	v.Read(3, 0, sec, 0)
	if !v.Complete() || v.Available(sec) != 3 {
		t.Fatalf("after reading limit 3: complete %v, available %d", v.Complete(), v.Available(sec))
	}
}

// Units that came back or a limit raised elsewhere show as an admission the
// view did not predict.
func TestViewUnpredictedAdmission(t *testing.T) {
	v := testView(0)
	v.Took(id(1), 10, 10*sec)
	v.Admitted(1, sec)
	if !v.stale {
		t.Fatal("an admission the view said could not fit left it trusted")
	}
}

// A scan makes the view complete, with every hold's return known.
func TestViewScanned(t *testing.T) {
	v := testView(0)
	v.Denied(1, sec, 1) // unknown units
	v.Scanned([]Hold{{ID: id(5), Amount: 6, Expires: 5 * sec}, {ID: id(6), Amount: 4, Expires: 3 * sec}}, sec)
	if !v.Complete() || v.Available(sec) != 0 || v.DenialReport(4, sec).RetryAfter(sec) != 2*time.Second || v.DenialReport(5, sec).RetryAfter(sec) != 4*time.Second {
		t.Fatalf("after a scan: complete %v, available %d, retryAfter(4) %v, retryAfter(5) %v",
			v.Complete(), v.Available(sec), v.DenialReport(4, sec).RetryAfter(sec), v.DenialReport(5, sec).RetryAfter(sec))
	}
}

// A view keeps at most maxHolds holds: beyond, neighbours merge, returning
// at the earlier instant (never later than the units really return).
func TestViewBoundsItsHolds(t *testing.T) {
	v := View{window: 100 * sec, limit: 1 << 20, limitKnown: true}
	const n = 5 * maxHolds
	for i := range n {
		v.Took(ID{byte(i), byte(i >> 8)}, 1, 100*sec+uint64(i)*1000)
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
		back := n - v.InFlight(at)
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
	fill := func() (View, []ID) {
		v := View{window: 1 << 40, limit: 1 << 20, limitKnown: true}
		ids := make([]ID, maxHolds+1)
		for i := range ids {
			ids[i] = ID{byte(i), byte(i >> 8), 1} // distinct
			v.Took(ids[i], 1, uint64(1000+i))     // the last one compacts: pairs merge
		}
		if !v.Complete() || v.InFlight(0) != maxHolds+1 {
			t.Fatalf("after %d holds: complete %v, %d in flight", len(ids), v.Complete(), v.InFlight(0))
		}
		return v, ids
	}
	v, ids := fill()
	v.Took(ID{0xff, 0xff, 0xff}, 1, 5000) // a new hold, after every merged one
	v.Ended(ids[maxHolds], 0)
	if !v.Complete() || v.InFlight(0) != maxHolds+1 {
		t.Fatalf("a new hold and the end of an unmerged one: complete %v, %d in flight, want %d", v.Complete(), v.InFlight(0), maxHolds+1)
	}

	for _, c := range []struct {
		name string
		do   func(v *View, ids []ID)
	}{
		{"the end of a merged-away hold", func(v *View, ids []ID) { v.Ended(ids[1], 0) }},
		{"the end of a merged hold's first", func(v *View, ids []ID) { v.Ended(ids[0], math.MaxUint64) }},
		{"a retry's echo of a merged-away hold", func(v *View, ids []ID) { v.Took(ids[1], 1, 1001) }},
	} {
		v, ids := fill()
		c.do(&v, ids)
		if v.Complete() || v.InFlight(0) < maxHolds {
			t.Errorf("%s: complete %v, %d in flight; want stale, at least %d", c.name, v.Complete(), v.InFlight(0), maxHolds)
		}
	}
}

// The fields every decision reads or writes end within HotBytes, which a
// ledger user's layout test counts on.
func TestViewHotFieldsFirst(t *testing.T) {
	var v View
	if end := unsafe.Offsetof(v.Queued) + unsafe.Sizeof(v.Queued); end > HotBytes {
		t.Errorf("the hot fields end at byte %d of a View, beyond HotBytes (%d)", end, HotBytes)
	}
}
