package ledger

import (
	"fmt"
	"strings"
	"unicode"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// outcome is what a create result means for a decision. In this package
// TigerBeetle's statuses are read in this file only, one function per
// meaning (below it, package conn folds exists into created and counts
// failures for observers, and reads nothing else): the
// holds of decisions, payments and funds through classify (the pipeline,
// coalescing, a chain sent again), posts and voids of holds through
// classifyEnd, accounts through accountMade, accountNew and
// accountExistsDifferently, a user's credit through classifyCredit, a
// step of SetLimit (a raise, a lowering, or posts of holds) through
// limitStepApplied, a hold carried to a new resource through
// classifyCarry. A status that means none of ours becomes a StatusError
// (transferStatusError, accountStatusError).
type outcome uint8

const (
	outAdmitted   outcome = iota // created, or exists: a retry of an applied attempt
	outDenied                    // too few units (or funds)
	outSpent                     // id_already_failed: an earlier attempt under this ID failed
	outLinked                    // another event of the chain failed
	outNoUser                    // the debit account does not exist
	outNoResource                // the credit account does not exist
	outReusedID                  // the ID was used for a different transfer
	outUnexpected                // anything else: a bug, or a cluster we do not understand
)

// classify turns a transfer's status into what it means for a decision.
// TransferExists does not reach it (package conn folds it into
// TransferCreated, a retry of an applied transfer, for every create of
// transfers); it is classified all the same, as admitted.
func classify(s tb.CreateTransferStatus) outcome {
	switch s {
	case tb.TransferCreated, tb.TransferExists:
		return outAdmitted
	case tb.TransferExceedsCredits:
		return outDenied
	case tb.TransferIDAlreadyFailed:
		return outSpent
	case tb.TransferLinkedEventFailed:
		return outLinked
	case tb.TransferDebitAccountNotFound:
		return outNoUser
	case tb.TransferCreditAccountNotFound:
		return outNoResource
	case tb.TransferExistsWithDifferentFlags, tb.TransferExistsWithDifferentPendingID,
		tb.TransferExistsWithDifferentTimeout, tb.TransferExistsWithDifferentDebitAccountID,
		tb.TransferExistsWithDifferentCreditAccountID, tb.TransferExistsWithDifferentAmount,
		tb.TransferExistsWithDifferentUserData128, tb.TransferExistsWithDifferentUserData64,
		tb.TransferExistsWithDifferentUserData32, tb.TransferExistsWithDifferentLedger,
		tb.TransferExistsWithDifferentCode:
		return outReusedID
	}
	return outUnexpected
}

// ending is what the status of a post or void of a hold means.
type ending uint8

const (
	endedNow      ending = iota // created, or exists: this post or void ended the hold
	endExpired                  // the hold expired first: its units are back
	endPostedYet                // another post ended it already
	endVoidedYet                // another void ended it already
	endNoHold                   // there is no such hold
	endUnexpected               // anything else
)

// classifyEnd turns the status of a post or void of a hold into what it
// means: the posts and voids of Commit, Cancel, Reset and a lease's
// give-back are read through it (SetLimit's posts are steps of it, read
// through limitStepApplied).
func classifyEnd(s tb.CreateTransferStatus) ending {
	switch s {
	case tb.TransferCreated, tb.TransferExists:
		return endedNow
	case tb.TransferPendingTransferExpired:
		return endExpired
	case tb.TransferPendingTransferAlreadyPosted:
		return endPostedYet
	case tb.TransferPendingTransferAlreadyVoided:
		return endVoidedYet
	case tb.TransferPendingTransferNotFound:
		return endNoHold
	}
	return endUnexpected
}

// transferStatusError is the error of status s of event i of a
// create_transfers that no outcome of ours covers.
func transferStatusError(i int, s tb.CreateTransferStatus) error {
	return &StatusError{Op: "create_transfers", Index: i, Status: s.String(), Code: uint32(s)}
}

// accountStatusError is the error of status s of event i of a
// create_accounts that no outcome of ours covers.
func accountStatusError(i int, s tb.CreateAccountStatus) error {
	return &StatusError{Op: "create_accounts", Index: i, Status: s.String(), Code: uint32(s)}
}

// accountExistsDifferently reports whether s says that an account with
// the ID exists with other fields.
func accountExistsDifferently(s tb.CreateAccountStatus) bool {
	switch s {
	case tb.AccountExistsWithDifferentFlags, tb.AccountExistsWithDifferentUserData128,
		tb.AccountExistsWithDifferentUserData64, tb.AccountExistsWithDifferentUserData32,
		tb.AccountExistsWithDifferentLedger, tb.AccountExistsWithDifferentCode:
		return true
	}
	return false
}

// accountMade reports whether s says that the account is there as asked:
// created now, or before (exists, with the same fields).
func accountMade(s tb.CreateAccountStatus) bool {
	return s == tb.AccountCreated || s == tb.AccountExists
}

// accountNew reports whether s says that the account was created by this
// request: it holds nothing yet.
func accountNew(s tb.CreateAccountStatus) bool { return s == tb.AccountCreated }

// credit is what the status of a user's provisioning credit means.
type credit uint8

const (
	creditNow     credit = iota // created now, or exists with the same limit (conn folds exists into created)
	creditAnother               // exists, with another limit: another provisioning's
	creditFailed                // anything else: the user is not credited
)

// classifyCredit turns the status of a provisioning credit into what it
// means.
func classifyCredit(s tb.CreateTransferStatus) credit {
	switch s {
	case tb.TransferCreated, tb.TransferExists:
		return creditNow
	case tb.TransferExistsWithDifferentAmount:
		return creditAnother
	}
	return creditFailed
}

// limitStepApplied reports whether s, the status of a transfer of a
// SetLimit step, is applied or lost a race that the next step looks at
// again (requests, expiry or another SetLimit from the same balance): not
// an error.
func limitStepApplied(s tb.CreateTransferStatus) bool {
	switch s {
	case tb.TransferCreated, tb.TransferLinkedEventFailed,
		tb.TransferIDAlreadyFailed, tb.TransferExceedsCredits, tb.TransferPendingTransferExpired,
		tb.TransferPendingTransferAlreadyPosted, tb.TransferPendingTransferAlreadyVoided:
		return true
	}
	return classify(s) == outReusedID
}

// classifyCarry turns the status of a hold carried to a new resource into
// whether it was carried now, or another process carried or took the room
// at once (raced: not an error).
func classifyCarry(s tb.CreateTransferStatus) (carried, raced bool) {
	switch s {
	case tb.TransferCreated:
		return true, false
	case tb.TransferExceedsCredits, tb.TransferExistsWithDifferentAmount, tb.TransferExistsWithDifferentTimeout:
		return false, true
	}
	return false, false
}

// differs says in words what an exists-with-different status found
// different ("another amount", "another debit account ID"), for messages
// that a caller reads: TigerBeetle's status names stay in StatusError.
func differs(s fmt.Stringer) string {
	_, field, ok := strings.Cut(s.String(), "ExistsWithDifferent")
	if !ok || field == "" {
		return "another request under that ID"
	}
	var words []string
	start := 0
	for i := 1; i <= len(field); i++ {
		if i == len(field) || unicode.IsUpper(rune(field[i])) && !unicode.IsUpper(rune(field[i-1])) ||
			unicode.IsDigit(rune(field[i])) && !unicode.IsDigit(rune(field[i-1])) {
			w := field[start:i]
			if w != "ID" {
				w = strings.ToLower(w)
			}
			words = append(words, w)
			start = i
		}
	}
	return "another " + strings.Join(words, " ")
}
