package api

import (
	"context"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/ledger"
)

// ledgerService is tblimit.v1.LedgerService: TigerBeetle's operations
// carried to the Service's Client (ledger.Client.Forward), for the tblimit
// CLI's --server. Its calls go through call, as LimitService's: admin on
// every resource, the in-flight bound, the metrics.
type ledgerService struct {
	tblimitv1.UnimplementedLedgerServiceServer
	s *Service
}

// Submit applies one operation.
func (l ledgerService) Submit(ctx context.Context, req *tblimitv1.SubmitRequest) (*tblimitv1.SubmitResponse, error) {
	return call(ctx, l.s, tblimitv1.LedgerService_Submit_FullMethodName, everyResource, req, l.submit)
}

func (l ledgerService) submit(ctx context.Context, req *tblimitv1.SubmitRequest) (*tblimitv1.SubmitResponse, error) {
	res, err := l.s.c.Forward(ctx, ledger.Operation(req.GetOperation()), req.GetEvents())
	if err != nil {
		return nil, err
	}
	return &tblimitv1.SubmitResponse{Results: res}, nil
}
