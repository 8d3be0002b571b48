package embedded

import "time"

// Now returns the engine's cluster clock: the time its next request would be
// stamped with (never before a timestamp already issued). Package ledger
// reads it to tell how long ago a cluster timestamp was.
func (e *Engine) Now() time.Time {
	return time.Unix(0, int64(max(e.now(), e.issued.Load())))
}

// InProcess reports that calls to the engine never wait for a network: they
// return as soon as the engine's lock is free. Package ledger uses it to skip
// the deadline machinery a remote cluster needs and to batch concurrent
// calls itself.
func (e *Engine) InProcess() bool { return true }
