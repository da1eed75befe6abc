// Package sfield writes the RateLimit-Policy and RateLimit header fields of
// draft-ietf-httpapi-ratelimit-headers-10 as Structured Field values (RFC
// 9651), for the HTTP middleware and the rate limit service alike.
package sfield

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrName is a policy name that is not a Structured Fields string.
var ErrName = errors.New("policy name must be 1 to 256 printable ASCII characters")

// ValidName accepts what a Structured Fields String can hold (RFC 9651
// §3.3.3: printable ASCII, 0x20 to 0x7E), bounded for header size.
func ValidName(name string) error {
	if name == "" || len(name) > 256 {
		return fmt.Errorf("%w: %q", ErrName, name)
	}
	for i := range len(name) {
		if name[i] < 0x20 || name[i] > 0x7e {
			return fmt.Errorf("%w: %q", ErrName, name)
		}
	}
	return nil
}

// writeString serialises a valid name as a Structured Fields String.
func writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := range len(s) {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
}

// Policy is the RateLimit-Policy value "name";q=Q[;qu="unit"][;w=W]: unit
// is left out when empty, the window when not positive.
func Policy(name string, quota int64, unit string, window int64) string {
	var b strings.Builder
	writeString(&b, name)
	b.WriteString(";q=")
	b.WriteString(strconv.FormatInt(max(quota, 0), 10))
	if unit != "" {
		b.WriteString(";qu=")
		writeString(&b, unit)
	}
	if window > 0 {
		b.WriteString(";w=")
		b.WriteString(strconv.FormatInt(window, 10))
	}
	return b.String()
}

// RateLimit is the RateLimit value "name";r=R;t=T (negatives as 0).
func RateLimit(name string, remaining, reset int64) string {
	var b strings.Builder
	writeString(&b, name)
	b.WriteString(";r=")
	b.WriteString(strconv.FormatInt(max(remaining, 0), 10))
	b.WriteString(";t=")
	b.WriteString(strconv.FormatInt(max(reset, 0), 10))
	return b.String()
}
