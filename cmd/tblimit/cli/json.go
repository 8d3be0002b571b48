package cli

import (
	"time"

	"github.com/tblimit/tblimit/ledger"
)

// The JSON that -o json prints. Field names and meanings are stable and
// documented in docs/cli.md ("Output and JSON fields"); new fields may be added, none are
// removed or renamed. Durations are seconds (fractional), times RFC 3339
// with nanoseconds in UTC, IDs 32 hex digits.

// resourceJSON is a resource: resources create / list / show.
type resourceJSON struct {
	Name           string `json:"name"`
	Kind           string `json:"kind"`   // requests, bytes or money
	Ledger         uint32 `json:"ledger"` // the limit's TigerBeetle ledger
	WindowSeconds  uint64 `json:"window_seconds"`
	DefaultLimit   uint64 `json:"default_limit"`
	Lazy           bool   `json:"lazy"`            // unknown users get the default limit on first use
	CurrencyLedger uint32 `json:"currency_ledger"` // money only; 0 otherwise
	Created        *bool  `json:"created,omitempty"`
}

func resourceOut(r ledger.Resource) resourceJSON {
	return resourceJSON{
		Name:           r.Name,
		Kind:           r.Kind.String(),
		Ledger:         r.Ledger,
		WindowSeconds:  uint64(r.Window / time.Second),
		DefaultLimit:   r.DefaultLimit,
		Lazy:           r.Lazy,
		CurrencyLedger: r.Currency,
	}
}

type resourcesJSON struct {
	Resources []resourceJSON `json:"resources"`
}

// userJSON is one user's state: users add / set-limit / show.
type userJSON struct {
	Resource           string  `json:"resource"`
	User               string  `json:"user"`
	Limit              uint64  `json:"limit"`
	InFlight           uint64  `json:"in_flight"`
	Available          uint64  `json:"available"`
	NextReleaseSeconds float64 `json:"next_release_seconds"` // 0 when nothing is in flight
	NextReleaseUnits   uint64  `json:"next_release_units"`
	ResetAfterSeconds  float64 `json:"reset_after_seconds"`
	Funds              *uint64 `json:"funds,omitempty"`   // money only: the user's currency balance
	Created            *bool   `json:"created,omitempty"` // users add only
}

func userOut(r ledger.Resource, key string, u ledger.Usage) userJSON {
	return userJSON{
		Resource:           r.Name,
		User:               key,
		Limit:              u.Limit,
		InFlight:           u.InFlight,
		Available:          u.Available,
		NextReleaseSeconds: seconds(u.NextRelease),
		NextReleaseUnits:   u.NextReleaseUnits,
		ResetAfterSeconds:  seconds(u.ResetAfter),
	}
}

// usersJSON lists a resource's users: users list.
type usersJSON struct {
	Resource string         `json:"resource"`
	Users    []userListJSON `json:"users"`
}

type userListJSON struct {
	User      string `json:"user"` // "" for a long key provisioned before keys were kept
	ID        string `json:"id"`   // the user's limit account
	Limit     uint64 `json:"limit"`
	InFlight  uint64 `json:"in_flight"`
	Available uint64 `json:"available"`
}

// decisionJSON is the answer to acquire and pay.
type decisionJSON struct {
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

func decisionOut(r ledger.Resource, amount uint64, d ledger.Decision) decisionJSON {
	out := decisionJSON{
		Allowed:           d.Allowed,
		Reason:            reasonName(d.Reason),
		Resource:          r.Name,
		Amount:            amount,
		Limit:             d.Limit,
		Remaining:         d.Remaining,
		RetryAfterSeconds: seconds(d.RetryAfter),
		ResetAfterSeconds: seconds(d.ResetAfter),
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
	return rfc3339(time.Unix(0, int64(ns)))
}

// fundJSON is the answer to fund.
type fundJSON struct {
	Resource       string `json:"resource"`
	CurrencyLedger uint32 `json:"currency_ledger"`
	User           string `json:"user"`
	Amount         uint64 `json:"amount"`
	Funds          uint64 `json:"funds"` // what the user holds afterwards
	ID             string `json:"id"`    // give it to --id to retry safely
}

// usageJSON is the answer to usage: a user's units in flight.
type usageJSON struct {
	Resource  string       `json:"resource"`
	User      string       `json:"user"`
	Limit     uint64       `json:"limit"`
	InFlight  uint64       `json:"in_flight"`
	Available uint64       `json:"available"`
	Flights   []flightJSON `json:"flights"` // the ones that return first first
	// Reservations is the name Flights had, emitted as well for a release
	// (the JSON's fields are never renamed at once): the same list.
	Reservations []flightJSON `json:"reservations"`
}

// flightJSON is one hold in flight (ledger.Flight).
type flightJSON struct {
	ID               string  `json:"id"`
	Amount           uint64  `json:"amount"`
	Taken            string  `json:"taken"`
	Returns          string  `json:"returns"`
	ReturnsInSeconds float64 `json:"returns_in_seconds"`
	Ref              uint64  `json:"ref"`
}

// importJSON is the summary of users import.
type importJSON struct {
	Resource  string  `json:"resource"`
	File      string  `json:"file"`
	Users     int     `json:"users"`     // rows in the file
	Added     int     `json:"added"`     // users created
	Changed   int     `json:"changed"`   // existing users whose limit was changed
	Unchanged int     `json:"unchanged"` // existing users that already had their limit
	Seconds   float64 `json:"seconds"`
}

// applyJSON is the answer to apply.
type applyJSON struct {
	DryRun    bool         `json:"dry_run"` // true: nothing was written
	Changes   []changeJSON `json:"changes"`
	Unchanged int          `json:"unchanged"` // users that already matched the file
}

type changeJSON struct {
	Action     string        `json:"action"` // create_resource, add_user or set_limit
	Resource   string        `json:"resource"`
	User       string        `json:"user,omitempty"`
	Limit      *uint64       `json:"limit,omitempty"`      // add_user, set_limit: the new limit
	OldLimit   *uint64       `json:"old_limit,omitempty"`  // set_limit
	Definition *resourceJSON `json:"definition,omitempty"` // create_resource
}
