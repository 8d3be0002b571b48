package ledger

import tb "github.com/tigerbeetle/tigerbeetle-go"

// outcome is what a create result means for a decision. Each boundary
// reads TigerBeetle's statuses in one place: the holds of decisions
// through classify (the pipeline, coalescing, a chain sent again), posts
// and voids of holds through classifyEnd, accounts through
// accountExistsDifferently. Provisioning a limit (provision.go) and
// carrying a hold to a new resource (migrate.go) read the statuses of
// transfers of their own, with their own meanings, where they send them.
type outcome uint8

// classify turns a transfer's status into what it means for a decision.
// TransferExists does not reach it from the pipeline (package conn folds it
// into TransferCreated, a retry of an applied transfer); it is classified
// all the same, as admitted, for a caller that reads results unfolded.
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

// classifyEnd turns the status of a post or void of a hold into what it
// means: every post and void this package sends (Commit, Cancel, Reset,
// a lease's give-back) is read through it.
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

func transferStatusError(i int, s tb.CreateTransferStatus) error {
	return &StatusError{Op: "create_transfers", Index: i, Status: s.String(), Code: uint32(s)}
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
