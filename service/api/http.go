package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

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
// the request and the response in the protobuf JSON mapping; any other
// path under /v1/, or another HTTP method, is answered in the same JSON
// error shape (404, 405).
func (s *Service) registerHTTP(mux *http.ServeMux) {
	routes := map[string]bool{}
	add := func(path string, h http.HandlerFunc) {
		routes[path] = true
		mux.HandleFunc("POST "+path, h)
	}
	add("/v1/acquire", route(s, tblimitv1.LimitService_Acquire_FullMethodName, s.Acquire))
	add("/v1/acquire-all", route(s, tblimitv1.LimitService_AcquireAll_FullMethodName, s.AcquireAll))
	add("/v1/peek", route(s, tblimitv1.LimitService_Peek_FullMethodName, s.Peek))
	add("/v1/pay", route(s, tblimitv1.LimitService_Pay_FullMethodName, s.Pay))
	add("/v1/fund", route(s, tblimitv1.LimitService_Fund_FullMethodName, s.Fund))
	add("/v1/funds", route(s, tblimitv1.LimitService_Funds_FullMethodName, s.Funds))
	add("/v1/reserve", route(s, tblimitv1.LimitService_Reserve_FullMethodName, s.Reserve))
	add("/v1/reserve-all", route(s, tblimitv1.LimitService_ReserveAll_FullMethodName, s.ReserveAll))
	add("/v1/commit", route(s, tblimitv1.LimitService_Commit_FullMethodName, s.Commit))
	add("/v1/cancel", route(s, tblimitv1.LimitService_Cancel_FullMethodName, s.Cancel))
	add("/v1/reset", route(s, tblimitv1.LimitService_Reset_FullMethodName, s.Reset))
	add("/v1/history", route(s, tblimitv1.LimitService_History_FullMethodName, s.History))
	add("/v1/audit", route(s, tblimitv1.LimitService_Audit_FullMethodName, s.Audit))
	add("/v1/create-resource", route(s, tblimitv1.LimitService_CreateResource_FullMethodName, s.CreateResource))
	add("/v1/list-resources", route(s, tblimitv1.LimitService_ListResources_FullMethodName, s.ListResources))
	add("/v1/add-users", route(s, tblimitv1.LimitService_AddUsers_FullMethodName, s.AddUsers))
	add("/v1/set-limit", route(s, tblimitv1.LimitService_SetLimit_FullMethodName, s.SetLimit))
	add("/v1/get-user", route(s, tblimitv1.LimitService_GetUser_FullMethodName, s.GetUser))
	add("/v1/list-users", route(s, tblimitv1.LimitService_ListUsers_FullMethodName, s.ListUsers))
	add("/v1/migrate-user", route(s, tblimitv1.LimitService_MigrateUser_FullMethodName, s.MigrateUser))
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		if routes[r.URL.Path] {
			w.Header().Set("Allow", http.MethodPost)
			writeErrorStatus(w, service.Errorf(codes.Unimplemented, service.ReasonMethodNotAllowed,
				"%s is answered to POST only", r.URL.Path), http.StatusMethodNotAllowed)
			return
		}
		writeErrorStatus(w, service.Errorf(codes.NotFound, service.ReasonNotFound,
			"no such path: tblimit.v1's are POST /v1/<method> (docs/api.md)"), http.StatusNotFound)
	})
}

var (
	unmarshal = protojson.UnmarshalOptions{}
	// Every field is written, false and 0 included: a denial says
	// "allowed": false rather than leaving it out.
	marshal = protojson.MarshalOptions{EmitUnpopulated: true}
)

// route is the HTTP handler of method, served by call, the gRPC method
// itself. The caller's token is checked before its body is read (the
// permission on some resource; call checks it on the resources the
// body names); a body over maxBody is 413. A decision's answer carries
// the RateLimit-Policy and RateLimit fields of its decisions.
func route[Req any, Resp proto.Message, PReq interface {
	*Req
	proto.Message
}](s *Service, method string, call func(context.Context, PReq) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start, ctx := time.Now(), incoming(r)
		if err := s.allow(ctx, method, nil); err != nil {
			err = statusOf(err) // counted as call counts the calls it refuses
			s.stats.called(method, start, err)
			writeError(w, err)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			writeErrorStatus(w, service.Errorf(codes.ResourceExhausted, service.ReasonTooLarge,
				"the body is over %d bytes", maxBody), http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			writeError(w, service.Errorf(codes.InvalidArgument, service.ReasonInvalidArgument, "reading the request: %v", err))
			return
		}
		req := PReq(new(Req))
		if err := unmarshal.Unmarshal(body, req); err != nil {
			writeError(w, service.Errorf(codes.InvalidArgument, service.ReasonInvalidArgument,
				"the body is not the JSON of a tblimit.v1.%s: %v", req.ProtoReflect().Descriptor().Name(), err))
			return
		}
		fields := new(rateFields)
		resp, err := call(context.WithValue(ctx, rateFieldsKey{}, fields), req)
		if err != nil {
			writeError(w, err)
			return
		}
		out, err := marshal.Marshal(resp)
		if err != nil {
			writeError(w, service.Status(err))
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		fields.write(h)
		code, retry := decided(resp)
		if retry > 0 {
			h.Set("Retry-After", strconv.FormatInt(retry, 10))
		}
		w.WriteHeader(code)
		w.Write(out)
	}
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

// writeError answers a failed call: its gRPC status as JSON
// ({"code": 5, "message": "...", "details": [ErrorInfo]},
// google.rpc.Status) with the HTTP status of its code.
func writeError(w http.ResponseWriter, err error) {
	writeErrorStatus(w, err, service.HTTPStatus(status.Code(err)))
}

// writeErrorStatus is writeError with an HTTP status of its own (413,
// 404, 405).
func writeErrorStatus(w http.ResponseWriter, err error, httpStatus int) {
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
	w.WriteHeader(httpStatus)
	w.Write(out)
}
