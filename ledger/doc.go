// Package ledger keeps rate, bandwidth and money limits as double-entry ledgers in TigerBeetle.
//
// Each limited resource is one TigerBeetle ledger with an operator account and
// one account per user flagged debits_must_not_exceed_credits. The user's
// limit is credited to the user's account; every admitted unit is a pending
// transfer (a hold) from the user to the operator with a timeout of one
// window, which its decision never posts or voids, so that it returns by
// expiring. Other calls end holds on purpose: a Reservation's Commit and
// Cancel, Reset, SetLimit lowering a limit while units are in flight, and a
// lease giving back what it did not use. An account can never debit more
// than it was credited, so a request over the limit fails with
// exceeds_credits: a denial, not an error. At most the limit is admitted in
// any interval of one window (a sliding window log), except for units a
// Cancel or a Reset gives back early. A real cluster frees expired units
// at, or shortly after, the expiry instant: it may deny a little late; it
// never admits too much.
//
// Money limits pair a hold (a pending transfer) on the limit ledger with
// the payment on a currency ledger, linked so that both happen or neither
// does.
// The same linking applies several limits to one request all-or-nothing
// (AcquireAll).
//
// Every decision goes through one pipeline: the calls of concurrent
// callers are sent together, one create request for all of them and one
// request in flight at a time, as a TigerBeetle client sends them; each
// admission is one pending transfer and no decision waits for a read. The
// Client keeps a view of each user (its limit, the holds it took and when
// they return) from which decisions report Remaining, RetryAfter and
// ResetAfter, and which lets it deny a user it knows to be drained without
// any I/O. Reads that keep views true are batched and rate-limited.
//
// Beyond the plain recipe: Reserve holds units until Commit or Cancel
// (concurrency limits); WithCoalescing merges the concurrent decisions of
// one user into one transfer (exact); WithLeases lets a process admit a hot
// user's calls locally from a lease (bounded error); WithExactDecisions
// reads every decision's accounts, for tools that report one decision.
// Stats counts what a Client sends, the engine-independent cost.
//
// This package (with its internal plumbing) is the only library package
// that talks to TigerBeetle; the embedded engine and the test helpers
// implement or drive tigerbeetle-go's Client. It works on any
// tigerbeetle-go Client: a real cluster (Dial) or the embedded engine in
// ledger/embedded (New). Most callers want the limiters in package recipes.
package ledger

// For a maintainer, where things are:
//   - What a decision reports (Limit, Remaining, RetryAfter, ResetAfter):
//     a view.Report, made by the view's methods (package
//     ledger/internal/view); decisionOf (decision.go) makes from one the
//     Decision of every call that decides (sent, denied locally, leased,
//     coalesced, paid, unanswered, checked). Two more are made from what
//     is already known, with no view: a ChargeUntil whose until has
//     passed (acquire.go) and a Reservation found again by its ID
//     (reservationOf, reserve.go). The layers above make the Decisions
//     they report without a Client (a rate limit service's refusals and
//     settled costs, a remote service's answers) with ExceedsLimit,
//     NotAsked, Settled and Answered (decision.go), never a literal (a
//     test walks the source). Each wire form of a Decision has one
//     encoder: the RateLimit fields in package recipes (itemOf), the
//     proto in service/api (decisionOf), Envoy's statuses in
//     service/ratelimit (descriptorStatus).
//   - What a TigerBeetle status means, in package internal/status only
//     (package conn below folds exists into created, and nothing more):
//     Classify (holds of decisions, payments, funds), ClassifyEnd (posts
//     and voids), AccountMade, AccountNew and AccountExistsDifferently
//     (accounts), ClassifyCredit, LimitStepApplied and ClassifyCarry; a
//     status none of them expects becomes a StatusError (errors.go).
//   - What a call asks and gets: Request, Part, Decision and Reason in
//     decision.go; the calls in acquire.go, check.go, money.go, reserve.go,
//     lease.go, reset.go. A call asks the pipeline through one of three
//     entry points in decide.go: decide (holds to decide: it returns an
//     answer, its Decisions and, when asked, its chain), send (ends of
//     holds and funds: their results) or sendChecks. It describes its work
//     with an opSpec and the steps of its chain.
//   - The pipeline is package internal/pipeline: its Op, made in one
//     place (Pipeline.New), its batches, built plainly or coalesced, with
//     their new users' accounts and their checks' reads, sent, then
//     completed from the answer while the next is in flight (reads that
//     keep views true, exact decisions and coalescing ask for quiet, every
//     batch completed first: see runner.Quiet there). It knows users and
//     Decisions only as type parameters, and asks the Client, its Host,
//     for everything it knows of them: host.go (how an answer teaches a
//     view, how a hold's Decision is described, how coalescing splits one
//     user's holds, what a first sight creates). In package ledger only
//     decide.go names an op: the calls' side (the retry loop, a new user's
//     sight, what a failed chain means, the reads after a denial, and the
//     Client's OnUnavailable for an answer that did not come); a test
//     parses both packages to keep it so. The other files of a decision's
//     way are called with users, transfers and results: markers.go
//     (request IDs' markers), lazy.go (users provisioned by their first
//     decisions: one create_accounts per batch ahead of its create, which
//     carries each new user's credit ahead of its hold), denial.go
//     (denials without I/O), refresh.go (reads that keep views true),
//     check.go and coalesce.go (the calls and the option).
//   - Reading an account's transfers or a ledger's accounts: pages, in
//     read.go; a lease's give-back is recognised by regranted.
//   - What a Client knows of a user without reading it (its view) is
//     package ledger/internal/view: its arithmetic (the limit, holds,
//     unknown units, and what they report) is unexported behind its
//     methods, and its exported fields are the pipeline's bookkeeping of
//     the user (provisioned, queued for a read or a scan, uses, when last
//     read), kept beside its hot fields so that both share the user's
//     first cache lines (view.HotBytes, checked by the layout tests of
//     both packages). Every method requires the user's mutex.
//   - Stats is conn.Stats, an alias: the counts a Conn keeps are returned
//     as they are, and the two the Client keeps (LocalDenials,
//     LeaseAdmissions) added; its doc comment lists the fields for callers,
//     whose own docs are in package conn.
//   - Code that looks repeated and stays so: the String methods of Reason
//     and End (and Kind, OnUnavailable) are a switch each, which names
//     every constant beside its text where a table by position would go
//     wrong silently when a constant is added; status.Classify and
//     status.ClassifyEnd are two switches over the same statuses because
//     a status means one thing for a hold and another for its post or
//     void.
