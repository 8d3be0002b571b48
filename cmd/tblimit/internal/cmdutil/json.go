package cmdutil

import (
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// The JSON that -o json prints. Field names and meanings are stable and
// documented in docs/cli.md ("Output and JSON fields"); new fields may be added, none are
// removed or renamed. Durations are seconds (fractional), times RFC 3339
// with nanoseconds in UTC, IDs 32 hex digits. The shapes several commands
// print are here; a command's own is beside the command.

// ResourceJSON is a resource: resources create / list / show.
type ResourceJSON struct {
	Name           string `json:"name"`
	Kind           string `json:"kind"`   // requests, bytes or money
	Ledger         uint32 `json:"ledger"` // the limit's TigerBeetle ledger
	WindowSeconds  uint64 `json:"window_seconds"`
	DefaultLimit   uint64 `json:"default_limit"`
	Lazy           bool   `json:"lazy"`            // unknown users get the default limit on first use
	CurrencyLedger uint32 `json:"currency_ledger"` // money only; 0 otherwise
	Created        *bool  `json:"created,omitempty"`
}

// ResourceOut is r as the JSON prints it.
func ResourceOut(r ledger.Resource) ResourceJSON {
	return ResourceJSON{
		Name:           r.Name,
		Kind:           r.Kind.String(),
		Ledger:         r.Ledger,
		WindowSeconds:  uint64(r.Window / time.Second),
		DefaultLimit:   r.DefaultLimit,
		Lazy:           r.Lazy,
		CurrencyLedger: r.Currency,
	}
}

// DecisionJSON is the answer to acquire and pay.
type DecisionJSON struct {
	Allowed           bool    `json:"allowed"`
	Reason            string  `json:"reason"` // admitted, limit_exceeded, insufficient_funds
	Resource          string  `json:"resource"`
	User              string  `json:"user,omitempty"` // acquire
	From              string  `json:"from,omitempty"` // pay
	To                string  `json:"to,omitempty"`   // pay
	Amount            uint64  `json:"amount"`
	Limit             uint64  `json:"limit"`
	Remaining         uint64  `json:"remaining"`
	RetryAfterSeconds float64 `json:"retry_after_seconds"` // 0 when allowed; -1 when never
	ResetAfterSeconds float64 `json:"reset_after_seconds"`
	Funds             *uint64 `json:"funds,omitempty"` // pay: what from holds afterwards
	ID                string  `json:"id"`
	Time              string  `json:"time"`
}

// DecisionOut is d, a decision on amount units of r, as the JSON prints it.
func DecisionOut(r ledger.Resource, amount uint64, d ledger.Decision) DecisionJSON {
	out := DecisionJSON{
		Allowed:           d.Allowed,
		Reason:            reasonName(d.Reason),
		Resource:          r.Name,
		Amount:            amount,
		Limit:             d.Limit,
		Remaining:         d.Remaining,
		RetryAfterSeconds: Seconds(d.RetryAfter),
		ResetAfterSeconds: Seconds(d.ResetAfter),
		ID:                d.ID.String(),
		Time:              stamp(d.Timestamp),
	}
	if d.RetryAfter < 0 {
		out.RetryAfterSeconds = -1
	}
	return out
}

func reasonName(r ledger.Reason) string {
	switch r {
	case ledger.Undecided:
		return "undecided"
	case ledger.Admitted:
		return "admitted"
	case ledger.LimitExceeded:
		return "limit_exceeded"
	case ledger.InsufficientFunds:
		return "insufficient_funds"
	case ledger.Unavailable:
		return "unavailable"
	}
	return r.String()
}

func stamp(ns uint64) string {
	if ns == 0 {
		return ""
	}
	return RFC3339(time.Unix(0, int64(ns)))
}

// RFC3339 prints a time as the JSON does: RFC 3339 with nanoseconds in UTC;
// "" for the zero time.
func RFC3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
