package ledger

import (
	"time"
)

// WithCoalescing merges the decisions of one user that go to the cluster in
// the same batch (the calls that arrived while the previous batch was in
// flight) into one pending transfer for the units of those that fit, when
// the Client's view of the user knows every unit in flight: one transfer,
// stored for ever, instead of one per call. The callers share that
// transfer: each Decision's ID is the shared transfer's, which cannot be
// used to retry the call. A call that does not fit is denied without being
// sent when the cluster confirmed the user's view within the last second,
// and is sent on its own otherwise; so is every call of a user whose view
// is not complete (another process took units it does not know of). If the
// cluster refuses a merged transfer (another process took units since),
// its calls are sent again on their own. A positive wait holds each batch
// back that long to gather more calls (timers have the operating system's
// granularity, often about a millisecond); 0 sends a batch as soon as the
// previous one is answered.
//
// Coalescing is exact: every unit still returns one full window after the
// transfer that admitted it, so at most the limit is admitted in any
// window, as without it.
//
// It applies to Acquire, and AcquireAll of one part, without a Request.ID
// or Ref; not with WithExactDecisions, nor to the calls WithLeases serves
// or renews (see New). Such a call whose answer is lost (ErrUnavailable)
// has no ID to be retried by (AttemptID reports none): it may have been
// admitted by a transfer shared with others, so a retry is a new request.
// Give calls an ID when a retry must not count twice.
func WithCoalescing(wait time.Duration) Option {
	return func(c *Client) { c.coalesce, c.gather = true, wait }
}
