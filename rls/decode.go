package rls

import (
	"errors"
	"fmt"
	"unicode/utf8"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
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

// field reads one known field's value from b (its tag already read) and
// returns the bytes it took; known false leaves it to be kept as unknown.
type field func(num protowire.Number, typ protowire.Type, b []byte) (n int, known bool, err error)

// walk reads every field of the message b, giving each to known, and
// returns unknown grown by the fields known did not take (their tag
// written anew, as protobuf writes it, then the value as it came).
func walk(b, unknown []byte, known field) ([]byte, error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || !num.IsValid() { // protobuf refuses numbers above 2^29 - 1
			return nil, fmt.Errorf("%w: a field's tag", errDecode)
		}
		b = b[n:]
		n, ok, err := known(num, typ, b)
		switch {
		case err != nil:
			return nil, err
		case !ok:
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, fmt.Errorf("%w: %w", errDecode, protowire.ParseError(n))
			}
			unknown = append(protowire.AppendTag(unknown, num, typ), b[:n]...)
		}
		b = b[n:]
	}
	return unknown, nil
}

// bytesField is a length-delimited value; what is its name for errors.
func bytesField(b []byte, what string) ([]byte, int, error) {
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return nil, 0, fmt.Errorf("%w: %s", errDecode, what)
	}
	return v, n, nil
}

// stringField is a length-delimited value that must be UTF-8, as proto3
// strings must.
func stringField(b []byte, what string) (string, int, error) {
	v, n, err := bytesField(b, what)
	if err == nil && !utf8.Valid(v) {
		err = fmt.Errorf("%w: %s is not UTF-8", errDecode, what)
	}
	return string(v), n, err
}

// varintField is a varint value.
func varintField(b []byte, what string) (uint64, int, error) {
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, 0, fmt.Errorf("%w: %s", errDecode, what)
	}
	return v, n, nil
}

// keepUnknown stores m's unknown fields when walking added some.
func keepUnknown(m protoreflect.Message, had int, unknown []byte) {
	if len(unknown) > had {
		m.SetUnknown(unknown)
	}
}

// decodeRequest reads b into req (which it resets first).
func decodeRequest(b []byte, req *pb.RateLimitRequest) error {
	*req = pb.RateLimitRequest{}
	unknown, err := walk(b, nil, func(num protowire.Number, typ protowire.Type, b []byte) (n int, known bool, err error) {
		switch {
		case num == 1 && typ == protowire.BytesType:
			req.Domain, n, err = stringField(b, "domain")
		case num == 2 && typ == protowire.BytesType:
			var v []byte
			if v, n, err = bytesField(b, "descriptor"); err == nil {
				d := &ratelimitv3.RateLimitDescriptor{}
				err = decodeDescriptor(v, d)
				req.Descriptors = append(req.Descriptors, d)
			}
		case num == 3 && typ == protowire.VarintType:
			var v uint64
			v, n, err = varintField(b, "hits_addend")
			req.HitsAddend = uint32(v)
		default:
			return 0, false, nil
		}
		return n, true, err
	})
	if err != nil {
		return err
	}
	keepUnknown(req.ProtoReflect(), 0, unknown)
	return nil
}

// decodeDescriptor merges b into d.
func decodeDescriptor(b []byte, d *ratelimitv3.RateLimitDescriptor) error {
	had := d.ProtoReflect().GetUnknown()
	unknown, err := walk(b, had, func(num protowire.Number, typ protowire.Type, b []byte) (n int, known bool, err error) {
		var v []byte
		switch {
		case num == 1 && typ == protowire.BytesType: // entries
			if v, n, err = bytesField(b, "entry"); err == nil {
				e := &ratelimitv3.RateLimitDescriptor_Entry{}
				err = decodeEntry(v, e)
				d.Entries = append(d.Entries, e)
			}
		case num == 2 && typ == protowire.BytesType: // limit
			if v, n, err = bytesField(b, "limit"); err == nil {
				if d.Limit == nil {
					d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{}
				}
				err = decodeOverride(v, d.Limit)
			}
		case num == 3 && typ == protowire.BytesType: // hits_addend
			if v, n, err = bytesField(b, "hits_addend"); err == nil {
				if d.HitsAddend == nil {
					d.HitsAddend = &wrapperspb.UInt64Value{}
				}
				err = decodeWrapper(v, d.HitsAddend.ProtoReflect(), func(x uint64) { d.HitsAddend.Value = x })
			}
		case num == 4 && typ == protowire.VarintType: // is_negative_hits
			var x uint64
			x, n, err = varintField(b, "is_negative_hits")
			d.IsNegativeHits = x != 0
		default:
			return 0, false, nil
		}
		return n, true, err
	})
	if err != nil {
		return err
	}
	keepUnknown(d.ProtoReflect(), len(had), unknown)
	return nil
}

func decodeEntry(b []byte, e *ratelimitv3.RateLimitDescriptor_Entry) error {
	unknown, err := walk(b, nil, func(num protowire.Number, typ protowire.Type, b []byte) (n int, known bool, err error) {
		switch {
		case num == 1 && typ == protowire.BytesType:
			e.Key, n, err = stringField(b, "an entry's key")
		case num == 2 && typ == protowire.BytesType:
			e.Value, n, err = stringField(b, "an entry's value")
		default:
			return 0, false, nil
		}
		return n, true, err
	})
	if err != nil {
		return err
	}
	keepUnknown(e.ProtoReflect(), 0, unknown)
	return nil
}

// decodeOverride merges b into o.
func decodeOverride(b []byte, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) error {
	had := o.ProtoReflect().GetUnknown()
	unknown, err := walk(b, had, func(num protowire.Number, typ protowire.Type, b []byte) (n int, known bool, err error) {
		var x uint64
		switch {
		case num == 1 && typ == protowire.VarintType:
			x, n, err = varintField(b, "requests_per_unit")
			o.RequestsPerUnit = uint32(x)
		case num == 2 && typ == protowire.VarintType:
			x, n, err = varintField(b, "unit")
			o.Unit = typev3.RateLimitUnit(int32(x))
		case num == 3 && typ == protowire.BytesType: // unit_multiplier
			var v []byte
			if v, n, err = bytesField(b, "unit_multiplier"); err == nil {
				if o.UnitMultiplier == nil {
					o.UnitMultiplier = &wrapperspb.UInt32Value{}
				}
				err = decodeWrapper(v, o.UnitMultiplier.ProtoReflect(), func(x uint64) { o.UnitMultiplier.Value = uint32(x) })
			}
		default:
			return 0, false, nil
		}
		return n, true, err
	})
	if err != nil {
		return err
	}
	keepUnknown(o.ProtoReflect(), len(had), unknown)
	return nil
}

// decodeWrapper merges b into a wrapper message m (one varint, field 1),
// whose value set stores.
func decodeWrapper(b []byte, m protoreflect.Message, set func(uint64)) error {
	had := m.GetUnknown()
	unknown, err := walk(b, had, func(num protowire.Number, typ protowire.Type, b []byte) (n int, known bool, err error) {
		if num != 1 || typ != protowire.VarintType {
			return 0, false, nil
		}
		var x uint64
		if x, n, err = varintField(b, "value"); err == nil {
			set(x)
		}
		return n, true, err
	})
	if err != nil {
		return err
	}
	keepUnknown(m, len(had), unknown)
	return nil
}
