package ratelimit

import (
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The lenient decoder reads whatever the standard one reads, to the same
// message; and what it reads besides differs only in strings' bytes.
func FuzzLenientDecoding(f *testing.F) {
	seed := &rls.RateLimitRequest{
		Domain:     "edge",
		HitsAddend: 3,
		Descriptors: []*rlcommon.RateLimitDescriptor{{
			Entries:    []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}, {Key: "path", Value: "/a"}},
			Limit:      &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: 2},
			HitsAddend: wrapperspb.UInt64(9),
		}},
	}
	b, err := proto.Marshal(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("\x0a\x02\xff\xfe\x12\x06\x0a\x04\x0a\x02\xc3\x28"))
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &rls.RateLimitRequest{}
		werr := proto.Unmarshal(b, want)
		got := &rls.RateLimitRequest{}
		gerr := lenient(b, got.ProtoReflect())
		if werr == nil {
			if gerr != nil {
				t.Fatalf("standard decoder reads %x, lenient says %v", b, gerr)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("%x: lenient %v, standard %v", b, got, want)
			}
		}
	})
}
