// Package resp builds RESP2 and RESP3 replies into a byte buffer.
package resp

import (
	"math"
	"strconv"

	"github.com/tidwall/redcon"
)

// Writer builds replies in the protocol the connection negotiated: RESP2
// by default, RESP3 after HELLO 3. Replies accumulate in Buf until the
// server hands them to the connection.
type Writer struct {
	Buf []byte
	// Proto is 2 or 3.
	Proto int
	// LastError is the text of the last error reply written: a door that
	// is not RESP reads why its command failed here, not by parsing the
	// reply back.
	LastError string
}

// Error writes an error reply; msg starts with its code ("ERR …").
func (w *Writer) Error(msg string) {
	w.LastError = msg
	w.Buf = redcon.AppendError(w.Buf, msg)
}

// Simple writes a simple string (+OK).
func (w *Writer) Simple(s string) { w.Buf = redcon.AppendString(w.Buf, s) }

// OK writes +OK.
func (w *Writer) OK() { w.Buf = append(w.Buf, "+OK\r\n"...) }

// Flag writes a yes/no answer as Redis' integer reply: 1 or 0.
func (w *Writer) Flag(b bool) {
	if b {
		w.Int(1)
		return
	}
	w.Int(0)
}

// Int writes an integer.
func (w *Writer) Int(n int64) { w.Buf = redcon.AppendInt(w.Buf, n) }

// Bulk writes a bulk string.
func (w *Writer) Bulk(b []byte) { w.Buf = redcon.AppendBulk(w.Buf, b) }

// BulkString writes a bulk string.
func (w *Writer) BulkString(s string) { w.Buf = redcon.AppendBulkString(w.Buf, s) }

// Null writes a null bulk string (RESP2 $-1, RESP3 _).
func (w *Writer) Null() {
	if w.Proto == 3 {
		w.Buf = append(w.Buf, "_\r\n"...)
		return
	}
	w.Buf = append(w.Buf, "$-1\r\n"...)
}

// NullArray writes a null array (RESP2 *-1, RESP3 _).
func (w *Writer) NullArray() {
	if w.Proto == 3 {
		w.Buf = append(w.Buf, "_\r\n"...)
		return
	}
	w.Buf = append(w.Buf, "*-1\r\n"...)
}

// Array writes the header of an array of n elements.
func (w *Writer) Array(n int) { w.Buf = redcon.AppendArray(w.Buf, n) }

// Map writes the header of a map of n pairs (RESP2: an array of 2n).
func (w *Writer) Map(n int) {
	if w.Proto == 3 {
		w.Buf = append(w.Buf, '%')
		w.Buf = strconv.AppendInt(w.Buf, int64(n), 10)
		w.Buf = append(w.Buf, '\r', '\n')
		return
	}
	w.Array(2 * n)
}

// Set writes the header of a set of n elements (RESP2: an array).
func (w *Writer) Set(n int) {
	if w.Proto == 3 {
		w.Buf = append(w.Buf, '~')
		w.Buf = strconv.AppendInt(w.Buf, int64(n), 10)
		w.Buf = append(w.Buf, '\r', '\n')
		return
	}
	w.Array(n)
}

// Double writes a double (RESP2: a bulk string), spelling infinities and
// NaN as Redis does: inf, -inf, nan.
func (w *Writer) Double(f float64) {
	var s string
	switch {
	case math.IsInf(f, 1):
		s = "inf"
	case math.IsInf(f, -1):
		s = "-inf"
	case math.IsNaN(f):
		s = "nan"
	default:
		s = strconv.FormatFloat(f, 'g', -1, 64)
	}
	if w.Proto == 3 {
		w.Buf = append(w.Buf, ',')
		w.Buf = append(w.Buf, s...)
		w.Buf = append(w.Buf, '\r', '\n')
		return
	}
	w.BulkString(s)
}

// Verbatim writes text as a RESP3 verbatim string of format "txt" (RESP2:
// a bulk string), as Redis does for INFO and CLIENT LIST.
func (w *Writer) Verbatim(text string) {
	if w.Proto == 3 {
		w.Buf = append(w.Buf, '=')
		w.Buf = strconv.AppendInt(w.Buf, int64(len(text)+4), 10)
		w.Buf = append(w.Buf, "\r\ntxt:"...)
		w.Buf = append(w.Buf, text...)
		w.Buf = append(w.Buf, '\r', '\n')
		return
	}
	w.BulkString(text)
}

// Limiter writes the five-integer limiter reply.
func (w *Writer) Limiter(r [5]int64) {
	w.Buf = append(w.Buf, "*5\r\n"...)
	for _, n := range r {
		w.Buf = redcon.AppendInt(w.Buf, n)
	}
}

// BulkStrings writes an array of bulk strings.
func (w *Writer) BulkStrings(ss []string) {
	w.Array(len(ss))
	for _, s := range ss {
		w.BulkString(s)
	}
}
