// Package guard keeps hostile bytes away from the RESP parser.
//
// sluice serves RESP with github.com/tidwall/redcon, whose parser trusts what
// a client declares: a bulk length near 2^63 overflows its bounds check and
// panics inside the connection goroutine (taking the whole process down), a
// huge multibulk length makes it loop that many times on every read, an
// endless line or never-finished request grows its buffer without bound, and
// its inline parser allocates quadratically in the number of words on a line.
// Rather than patch redcon, the guard sits between the network and redcon:
//
//   - Validator is an incremental state machine over the request stream. It
//     checks framing as bytes arrive, enforcing Redis' limits with Redis' own
//     error texts, and buffers only what it must (at most one inline line).
//   - Listener wraps a net.Listener; its Conn hands redcon nothing but
//     well-formed multibulk requests. Inline requests are parsed the way
//     Redis parses them (sdssplitargs) and handed on as multibulk, so redcon's
//     own inline parser never runs; empty requests ("*0", "*-1", blank lines)
//     are dropped, as Redis skips them. Reads are cut at request boundaries
//     whenever possible so redcon's buffer drains instead of growing.
//
// On a violation the Conn writes "-ERR Protocol error: <reason>\r\n", closes
// the connection and reports io.EOF to redcon; other connections never notice.
//
// Before authentication (when a password is configured) the stricter Redis
// limits apply: at most 10 arguments and 16384-byte bulks. The server flips a
// connection with Conn.SetAuthenticated after a successful AUTH; until then
// the Conn hands over one request per Read, so an AUTH takes effect for the
// very next request of the same pipeline.
package guard
