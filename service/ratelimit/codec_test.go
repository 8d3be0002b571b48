package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tblimit/tblimit/testenv"
)

// rawCodec sends and receives messages as the bytes they are.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// field is a length-delimited protobuf field (wire type 2) of number n,
// written out by hand: its tag byte, its length, its bytes.
func field(n byte, b []byte) []byte {
	if len(b) > 127 {
		panic("field: longer than one length byte")
	}
	return append([]byte{n<<3 | 2, byte(len(b))}, b...)
}

// rawRequest is a RateLimitRequest of domain with one descriptor, one entry
// key=value, whatever value's bytes are.
func rawRequest(domain, key string, value []byte) []byte {
	entry := append(field(1, []byte(key)), field(2, value)...)
	return append(field(1, []byte(domain)), field(2, field(1, entry))...)
}

func (e *env) askRaw(req []byte) (*rls.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []byte
	err := e.conn.Invoke(ctx, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &req, &out, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		return nil, err
	}
	resp := &rls.RateLimitResponse{}
	return resp, proto.Unmarshal(out, resp)
}

// A descriptor value is decided whatever its bytes: Envoy copies header
// bytes into it, and a header need not be UTF-8, which proto3's string
// requires. Each value is a user of its own.
func TestValuesThatAreNotUTF8(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 2}
`)
		values := [][]byte{{0xff, 0xfe}, {0xff, 0xfd}, {'k', 0xc3, 0x28}, {0xed, 0xa0, 0x80}}
		if len(values[0]) != 2 || proto.Unmarshal(rawRequest(e.domain, "api_key", values[0]), &rls.RateLimitRequest{}) == nil {
			t.Fatal("the standard decoder reads the request: it tests nothing here")
		}
		for _, v := range values {
			for i, want := range []string{"OK: OK", "OK: OK", "OVER_LIMIT: OVER_LIMIT"} {
				r, err := e.askRaw(rawRequest(e.domain, "api_key", v))
				if err != nil {
					t.Fatalf("value %q, call %d: %v", v, i+1, err)
				}
				if got := codesOf(r); got != want {
					t.Fatalf("value %q, call %d = %s, want %s", v, i+1, got, want)
				}
			}
		}
		// The same bytes through the generated client, for a value that is
		// UTF-8, and the raw request agree on the user.
		ok := []byte("caf\xc3\xa9")
		if r, err := e.askRaw(rawRequest(e.domain, "api_key", ok)); err != nil || codesOf(r) != "OK: OK" {
			t.Fatalf("raw UTF-8 value = %v, %v; want OK: OK", r, err)
		}
		if r := e.ask(desc("api_key", string(ok))); codesOf(r) != "OK: OK" || r.GetStatuses()[0].GetLimitRemaining() != 0 {
			t.Fatalf("the same value, generated client = %s, %d remaining; want OK: OK, 0", codesOf(r), r.GetStatuses()[0].GetLimitRemaining())
		}
	})
}

// A request that is not a RateLimitRequest at all is still refused.
func TestMalformedRequestRefused(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b *testenv.Backend) {
		e := start(t, b, nil, `
domain: DOMAIN
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 2}
`)
		good := rawRequest(e.domain, "api_key", []byte{0xff})
		for name, req := range map[string][]byte{
			"truncated":         good[:len(good)-2],
			"length past end":   append(field(1, []byte(e.domain)), 0x12, 0x40, 0x0a),
			"bad wire type":     append(field(1, []byte(e.domain)), 0x17),
			"descriptor broken": append(field(1, []byte(e.domain)), field(2, []byte{0x0a, 0x05, 0x0a})...),
		} {
			_, err := e.askRaw(req)
			if status.Code(err) != codes.Internal {
				t.Errorf("%s: %v, want code Internal", name, err)
			}
		}
		if _, err := e.askRaw(good); err != nil {
			t.Fatal(fmt.Errorf("the well-formed request: %w", err))
		}
	})
}
