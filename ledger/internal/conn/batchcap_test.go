package conn

import "testing"

// The cap settles on exactly the largest request a cluster takes, within a
// few refusals, and learns again when the cluster takes less.
func TestBatchCapFindsTheLimit(t *testing.T) {
	settle := func(b *batchCap, limit int) (refusals int) {
		for range 64 {
			n := b.size()
			if n > limit {
				b.refused(n)
				refusals++
			} else {
				b.accepted(n)
			}
		}
		return refusals
	}
	for _, limit := range []int{1, 2, 127, 253, 2031, 8000, BatchMax} {
		b := newBatchCap()
		refusals := settle(b, limit)
		if b.size() != limit {
			t.Errorf("limit %d: cap settled on %d", limit, b.size())
		}
		if refusals > 2*14 {
			t.Errorf("limit %d: %d refusals, want at most two per bit", limit, refusals)
		}
	}
	b := newBatchCap()
	settle(b, BatchMax)
	settle(b, 253)
	if b.size() != 253 {
		t.Errorf("after the cluster shrank to 253: cap %d", b.size())
	}
	// Requests smaller than the cap say nothing about it.
	b = newBatchCap()
	b.refused(300)
	before := b.size()
	b.accepted(10)
	if b.size() != before {
		t.Errorf("a small request moved the cap from %d to %d", before, b.size())
	}
}
