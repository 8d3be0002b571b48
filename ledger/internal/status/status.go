// Package status says what TigerBeetle's result statuses mean to
// tblimit: in package ledger and below, a status is read here only, one
// function per meaning (below it, package conn folds exists into created
// and counts failures for observers, and reads nothing else). The holds
// of decisions, payments and funds are read through Classify (the
// pipeline, coalescing, a chain sent again), posts and voids of holds
// through ClassifyEnd, accounts through AccountMade, AccountNew and
// AccountExistsDifferently, a user's credit through ClassifyCredit, a
// step of SetLimit (a raise, a lowering, or posts of holds) through
// LimitStepApplied, a hold carried to a new resource through
// ClassifyCarry. A status that means none of these is package ledger's
// to turn into a StatusError.
package status

import (
	"fmt"
	"strings"
	"unicode"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// Outcome is what a create result means for a decision.
type Outcome uint8

const (
	Admitted   Outcome = iota // created, or exists: a retry of an applied attempt
	Denied                    // too few units (or funds)
	Spent                     // id_already_failed: an earlier attempt under this ID failed
	Linked                    // another event of the chain failed
	NoUser                    // the debit account does not exist
	NoResource                // the credit account does not exist
	ReusedID                  // the ID was used for a different transfer
	Unexpected                // anything else: a bug, or a cluster we do not understand
)

// Classify turns a transfer's status into what it means for a decision.
// TransferExists does not reach it (package conn folds it into
// TransferCreated, a retry of an applied transfer, for every create of
// transfers); it is classified all the same, as admitted.
func Classify(s tb.CreateTransferStatus) Outcome {
	switch s {
	case tb.TransferCreated, tb.TransferExists:
		return Admitted
	case tb.TransferExceedsCredits:
		return Denied
	case tb.TransferIDAlreadyFailed:
		return Spent
	case tb.TransferLinkedEventFailed:
		return Linked
	case tb.TransferDebitAccountNotFound:
		return NoUser
	case tb.TransferCreditAccountNotFound:
		return NoResource
	case tb.TransferExistsWithDifferentFlags, tb.TransferExistsWithDifferentPendingID,
		tb.TransferExistsWithDifferentTimeout, tb.TransferExistsWithDifferentDebitAccountID,
		tb.TransferExistsWithDifferentCreditAccountID, tb.TransferExistsWithDifferentAmount,
		tb.TransferExistsWithDifferentUserData128, tb.TransferExistsWithDifferentUserData64,
		tb.TransferExistsWithDifferentUserData32, tb.TransferExistsWithDifferentLedger,
		tb.TransferExistsWithDifferentCode:
		return ReusedID
	}
	return Unexpected
}

// Ending is what the status of a post or void of a hold means.
type Ending uint8

const (
	EndedNow      Ending = iota // created, or exists: this post or void ended the hold
	EndExpired                  // the hold expired first: its units are back
	EndPostedYet                // another post ended it already
	EndVoidedYet                // another void ended it already
	EndNoHold                   // there is no such hold
	EndUnexpected               // anything else
)

// ClassifyEnd turns the status of a post or void of a hold into what it
// means: the posts and voids of Commit, Cancel, Reset and a lease's
// give-back are read through it (SetLimit's posts are steps of it, read
// through LimitStepApplied).
func ClassifyEnd(s tb.CreateTransferStatus) Ending {
	switch s {
	case tb.TransferCreated, tb.TransferExists:
		return EndedNow
	case tb.TransferPendingTransferExpired:
		return EndExpired
	case tb.TransferPendingTransferAlreadyPosted:
		return EndPostedYet
	case tb.TransferPendingTransferAlreadyVoided:
		return EndVoidedYet
	case tb.TransferPendingTransferNotFound:
		return EndNoHold
	}
	return EndUnexpected
}

// AccountExistsDifferently reports whether s says that an account with
// the ID exists with other fields.
func AccountExistsDifferently(s tb.CreateAccountStatus) bool {
	switch s {
	case tb.AccountExistsWithDifferentFlags, tb.AccountExistsWithDifferentUserData128,
		tb.AccountExistsWithDifferentUserData64, tb.AccountExistsWithDifferentUserData32,
		tb.AccountExistsWithDifferentLedger, tb.AccountExistsWithDifferentCode:
		return true
	}
	return false
}

// AccountMade reports whether s says that the account is there as asked:
// created now, or before (exists, with the same fields).
func AccountMade(s tb.CreateAccountStatus) bool {
	return s == tb.AccountCreated || s == tb.AccountExists
}

// AccountNew reports whether s says that the account was created by this
// request: it holds nothing yet.
func AccountNew(s tb.CreateAccountStatus) bool { return s == tb.AccountCreated }

// Credit is what the status of a user's provisioning credit means.
type Credit uint8

const (
	CreditNow     Credit = iota // created now, or exists with the same limit (conn folds exists into created)
	CreditAnother               // exists, with another limit: another provisioning's
	CreditFailed                // anything else: the user is not credited
)

// ClassifyCredit turns the status of a provisioning credit into what it
// means.
func ClassifyCredit(s tb.CreateTransferStatus) Credit {
	switch s {
	case tb.TransferCreated, tb.TransferExists:
		return CreditNow
	case tb.TransferExistsWithDifferentAmount:
		return CreditAnother
	}
	return CreditFailed
}

// LimitStepApplied reports whether s, the status of a transfer of a
// SetLimit step, is applied or lost a race that the next step looks at
// again (requests, expiry or another SetLimit from the same balance): not
// an error.
func LimitStepApplied(s tb.CreateTransferStatus) bool {
	switch s {
	case tb.TransferCreated, tb.TransferLinkedEventFailed,
		tb.TransferIDAlreadyFailed, tb.TransferExceedsCredits, tb.TransferPendingTransferExpired,
		tb.TransferPendingTransferAlreadyPosted, tb.TransferPendingTransferAlreadyVoided:
		return true
	}
	return Classify(s) == ReusedID
}

// ClassifyCarry turns the status of a hold carried to a new resource into
// whether it was carried now, or another process carried or took the room
// at once (raced: not an error).
func ClassifyCarry(s tb.CreateTransferStatus) (carried, raced bool) {
	switch s {
	case tb.TransferCreated:
		return true, false
	case tb.TransferExceedsCredits, tb.TransferExistsWithDifferentAmount, tb.TransferExistsWithDifferentTimeout:
		return false, true
	}
	return false, false
}

// Differs says in words what an exists-with-different status found
// different ("another amount", "another debit account ID"), for messages
// that a caller reads: TigerBeetle's status names stay in StatusError.
func Differs(s fmt.Stringer) string {
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
