package ratelimit

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// bytesCodec is the server's gRPC codec: protobuf, except that a request
// whose string fields hold bytes that are not UTF-8 is still read, each
// such field holding its bytes as they came.
//
// Envoy copies a header's bytes into a descriptor value, and a header may
// hold any byte but a few; proto3 requires a string field to be UTF-8, so
// the standard codec refuses such a request (Internal, "string field
// contains invalid UTF-8") and Envoy falls back to its failure mode for
// it. A descriptor value is a key like any other here (keys escape what is
// not UTF-8), so it is decided. Answers are marshalled by the standard
// codec: they hold no value a caller sent.
type bytesCodec struct{ encoding.CodecV2 }

func newBytesCodec() bytesCodec { return bytesCodec{encoding.GetCodecV2("proto")} }

func (c bytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	m, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	r := m.ProtoReflect()
	proto.Reset(m)
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if lenient(buf.ReadOnlyData(), r) != nil {
		return err // not a matter of UTF-8: the standard codec's error
	}
	return nil
}

// lenient merges the wire-format message b into m as proto.Unmarshal does,
// but sets string fields from their bytes whether UTF-8 or not. Every other
// field goes through proto.Unmarshal, one field at a time, merged.
func lenient(b []byte, m protoreflect.Message) error {
	fields := m.Descriptor().Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		size := protowire.ConsumeFieldValue(num, typ, b[n:])
		if size < 0 {
			return protowire.ParseError(size)
		}
		field, value := b[:n+size], b[n:n+size]
		b = b[n+size:]
		fd := fields.ByNumber(num)
		if fd == nil || typ != protowire.BytesType || fd.IsMap() ||
			fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.MessageKind {
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(field, m.Interface()); err != nil {
				return err
			}
			continue
		}
		inner, k := protowire.ConsumeBytes(value)
		if k < 0 {
			return protowire.ParseError(k)
		}
		if err := setLenient(m, fd, inner); err != nil {
			return err
		}
	}
	return nil
}

// setLenient sets (or appends to, when repeated) the string or message
// field fd of m from its wire bytes b.
func setLenient(m protoreflect.Message, fd protoreflect.FieldDescriptor, b []byte) error {
	switch {
	case fd.Kind() == protoreflect.StringKind && fd.IsList():
		m.Mutable(fd).List().Append(protoreflect.ValueOfString(string(b)))
	case fd.Kind() == protoreflect.StringKind:
		m.Set(fd, protoreflect.ValueOfString(string(b)))
	case fd.IsList():
		return lenient(b, m.Mutable(fd).List().AppendMutable().Message())
	default:
		return lenient(b, m.Mutable(fd).Message())
	}
	return nil
}
