package api

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	tblimitv1 "github.com/tblimit/tblimit/api/tblimit/v1"
	"github.com/tblimit/tblimit/service"
)

// maxBody bounds a request's body.
const maxBody = 4 << 20

// registerHTTP adds a route per method: POST /v1/<method in kebab case>,
// the request and the response in the protobuf JSON mapping.
func (s *Service) registerHTTP(mux *http.ServeMux) {
	route(mux, "/v1/acquire", s.Acquire)
	route(mux, "/v1/acquire-all", s.AcquireAll)
	route(mux, "/v1/peek", s.Peek)
	route(mux, "/v1/pay", s.Pay)
	route(mux, "/v1/fund", s.Fund)
	route(mux, "/v1/funds", s.Funds)
	route(mux, "/v1/reserve", s.Reserve)
	route(mux, "/v1/reserve-all", s.ReserveAll)
	route(mux, "/v1/commit", s.Commit)
	route(mux, "/v1/cancel", s.Cancel)
	route(mux, "/v1/reset", s.Reset)
	route(mux, "/v1/history", s.History)
	route(mux, "/v1/audit", s.Audit)
}

var (
	unmarshal = protojson.UnmarshalOptions{}
	// Every field is written, false and 0 included: a denial says
	// "allowed": false rather than leaving it out.
	marshal = protojson.MarshalOptions{EmitUnpopulated: true}
)

// route serves POST path by call, the gRPC method itself.
func route[Req any, Resp proto.Message, PReq interface {
	*Req
	proto.Message
}](mux *http.ServeMux, path string, call func(context.Context, PReq) (Resp, error)) {
	mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, status.Error(codes.InvalidArgument, "reading the request: "+err.Error()))
			return
		}
		req := PReq(new(Req))
		if err := unmarshal.Unmarshal(body, req); err != nil {
			writeError(w, status.Errorf(codes.InvalidArgument, "the body is not a %s in JSON: %v", req.ProtoReflect().Descriptor().Name(), err))
			return
		}
		resp, err := call(incoming(r), req)
		if err != nil {
			writeError(w, err)
			return
		}
		out, err := marshal.Marshal(resp)
		if err != nil {
			writeError(w, status.Error(codes.Internal, err.Error()))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		code, retry := decided(resp)
		if retry > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
		}
		w.WriteHeader(code)
		w.Write(out)
	})
}

// incoming is r's context with r's headers as incoming gRPC metadata, as
// a gRPC call's context has them (see Authorize).
func incoming(r *http.Request) context.Context {
	md := make(metadata.MD, len(r.Header))
	for k, v := range r.Header {
		md[strings.ToLower(k)] = v
	}
	return metadata.NewIncomingContext(r.Context(), md)
}

// decided is the HTTP status of an answer, and its Retry-After in seconds
// (0: none): 200 unless a decision denied; then 429 for a limit, with
// Retry-After rounded up to whole seconds (at least 1); 402 for a payment
// short of funds; 503 with Retry-After 1 for a decision the server's
// policy made while the cluster did not answer.
func decided(resp proto.Message) (int, int64) {
	var ds []*tblimitv1.Decision
	switch m := resp.(type) {
	case interface{ GetDecision() *tblimitv1.Decision }:
		ds = []*tblimitv1.Decision{m.GetDecision()}
	case interface{ GetDecisions() []*tblimitv1.Decision }:
		ds = m.GetDecisions()
	}
	code, retry := http.StatusOK, int64(0)
	for _, d := range ds {
		if d.GetAllowed() {
			continue
		}
		switch d.GetReason() {
		case tblimitv1.Reason_REASON_LIMIT_EXCEEDED:
			secs := int64(math.Ceil(d.GetRetryAfter().AsDuration().Seconds()))
			code, retry = http.StatusTooManyRequests, max(retry, secs, 1)
		case tblimitv1.Reason_REASON_INSUFFICIENT_FUNDS:
			return http.StatusPaymentRequired, 0
		case tblimitv1.Reason_REASON_UNAVAILABLE:
			return http.StatusServiceUnavailable, 1
		}
	}
	return code, retry
}

// writeError answers a failed call: its gRPC status as JSON
// ({"code": 5, "message": "..."}, google.rpc.Status) with the HTTP status
// of its code.
func writeError(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	out, merr := marshal.Marshal(st.Proto())
	if merr != nil {
		http.Error(w, st.Message(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch st.Code() {
	case codes.Unavailable:
		w.Header().Set("Retry-After", "1")
	case codes.Unauthenticated:
		w.Header().Set("WWW-Authenticate", "Bearer") // RFC 6750
	}
	w.WriteHeader(service.HTTPStatus(st.Code()))
	w.Write(out)
}
