package rls

import (
	"errors"
	"fmt"
	"unicode/utf8"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A decoder for the one message the service reads, RateLimitRequest,
// written for its fields instead of protobuf's reflection: it fills the
// same generated structs, with protobuf's rules — a later scalar wins, a
// repeated field appends, a message field seen twice merges, strings must
// be UTF-8, a known field of another wire type and an unknown field are
// kept as unknown fields (SetUnknown: the tag written anew, as protobuf
// does, the value as it came), a malformed input is an error.
// FuzzDecodeRequest checks it against proto.Unmarshal.

// errDecode: a request that is not a well-formed RateLimitRequest.
var errDecode = errors.New("rls: malformed RateLimitRequest")

// consumeTag is protowire.ConsumeTag refusing field numbers protobuf does
// not allow (above 2^29 - 1).
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && !num.IsValid() {
		return 0, 0, -1
	}
	return num, typ, n
}

// decodeRequest reads b into req (which it resets first).
func decodeRequest(b []byte, req *pb.RateLimitRequest) error {
	*req = pb.RateLimitRequest{}
	var unknown []byte
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errDecode, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType: // domain
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(v) {
				return fmt.Errorf("%w: domain", errDecode)
			}
			req.Domain, b = string(v), b[n:]
		case num == 2 && typ == protowire.BytesType: // descriptors
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: descriptor", errDecode)
			}
			d := &ratelimitv3.RateLimitDescriptor{}
			if err := decodeDescriptor(v, d); err != nil {
				return err
			}
			req.Descriptors, b = append(req.Descriptors, d), b[n:]
		case num == 3 && typ == protowire.VarintType: // hits_addend
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("%w: hits_addend", errDecode)
			}
			req.HitsAddend, b = uint32(v), b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: %w", errDecode, protowire.ParseError(n))
			}
			unknown = append(protowire.AppendTag(unknown, num, typ), b[:n]...)
			b = b[n:]
		}
	}
	if unknown != nil {
		req.ProtoReflect().SetUnknown(unknown)
	}
	return nil
}

// decodeDescriptor merges b into d.
func decodeDescriptor(b []byte, d *ratelimitv3.RateLimitDescriptor) error {
	unknown := d.ProtoReflect().GetUnknown()
	had := len(unknown)
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errDecode, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType: // entries
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: entry", errDecode)
			}
			e := &ratelimitv3.RateLimitDescriptor_Entry{}
			if err := decodeEntry(v, e); err != nil {
				return err
			}
			d.Entries, b = append(d.Entries, e), b[n:]
		case num == 2 && typ == protowire.BytesType: // limit
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: limit", errDecode)
			}
			if d.Limit == nil {
				d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{}
			}
			if err := decodeOverride(v, d.Limit); err != nil {
				return err
			}
			b = b[n:]
		case num == 3 && typ == protowire.BytesType: // hits_addend
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: hits_addend", errDecode)
			}
			if d.HitsAddend == nil {
				d.HitsAddend = &wrapperspb.UInt64Value{}
			}
			if err := decodeUint64Value(v, d.HitsAddend); err != nil {
				return err
			}
			b = b[n:]
		case num == 4 && typ == protowire.VarintType: // is_negative_hits
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("%w: is_negative_hits", errDecode)
			}
			d.IsNegativeHits, b = v != 0, b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: %w", errDecode, protowire.ParseError(n))
			}
			unknown = append(protowire.AppendTag(unknown, num, typ), b[:n]...)
			b = b[n:]
		}
	}
	if len(unknown) > had {
		d.ProtoReflect().SetUnknown(unknown)
	}
	return nil
}

func decodeEntry(b []byte, e *ratelimitv3.RateLimitDescriptor_Entry) error {
	var unknown []byte
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errDecode, protowire.ParseError(n))
		}
		b = b[n:]
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(v) {
				return fmt.Errorf("%w: entry key or value", errDecode)
			}
			if num == 1 {
				e.Key = string(v)
			} else {
				e.Value = string(v)
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errDecode, protowire.ParseError(n))
		}
		unknown = append(protowire.AppendTag(unknown, num, typ), b[:n]...)
		b = b[n:]
	}
	if unknown != nil {
		e.ProtoReflect().SetUnknown(unknown)
	}
	return nil
}

// decodeOverride merges b into o.
func decodeOverride(b []byte, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) error {
	unknown := o.ProtoReflect().GetUnknown()
	had := len(unknown)
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errDecode, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 2) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("%w: limit", errDecode)
			}
			if num == 1 {
				o.RequestsPerUnit = uint32(v)
			} else {
				o.Unit = typev3.RateLimitUnit(int32(v))
			}
			b = b[n:]
		case num == 3 && typ == protowire.BytesType: // unit_multiplier
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: unit_multiplier", errDecode)
			}
			if o.UnitMultiplier == nil {
				o.UnitMultiplier = &wrapperspb.UInt32Value{}
			}
			var w wrapperspb.UInt64Value
			w.Value = uint64(o.UnitMultiplier.Value)
			if err := decodeWrapped(v, &w, o.UnitMultiplier.ProtoReflect().GetUnknown(), func(u []byte) {
				o.UnitMultiplier.ProtoReflect().SetUnknown(u)
			}); err != nil {
				return err
			}
			o.UnitMultiplier.Value = uint32(w.Value)
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: %w", errDecode, protowire.ParseError(n))
			}
			unknown = append(protowire.AppendTag(unknown, num, typ), b[:n]...)
			b = b[n:]
		}
	}
	if len(unknown) > had {
		o.ProtoReflect().SetUnknown(unknown)
	}
	return nil
}

// decodeUint64Value merges b into w.
func decodeUint64Value(b []byte, w *wrapperspb.UInt64Value) error {
	return decodeWrapped(b, w, w.ProtoReflect().GetUnknown(), func(u []byte) { w.ProtoReflect().SetUnknown(u) })
}

// decodeWrapped merges a wrapper message (one varint, field 1) into w,
// whose unknown fields so far are unknown; setUnknown stores more.
func decodeWrapped(b []byte, w *wrapperspb.UInt64Value, unknown []byte, setUnknown func([]byte)) error {
	had := len(unknown)
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errDecode, protowire.ParseError(n))
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("%w: value", errDecode)
			}
			w.Value, b = v, b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errDecode, protowire.ParseError(n))
		}
		unknown = append(protowire.AppendTag(unknown, num, typ), b[:n]...)
		b = b[n:]
	}
	if len(unknown) > had {
		setUnknown(unknown)
	}
	return nil
}
