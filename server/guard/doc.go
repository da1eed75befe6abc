// Package guard parses what clients send, keeping hostile bytes from doing
// harm.
//
// sluice once served RESP with github.com/tidwall/redcon's reader, whose
// parser trusts what a client declares: a bulk length near 2^63 overflows
// its bounds check and panics inside the connection goroutine (taking the
// whole process down), a huge multibulk length makes it loop that many
// times on every read, an endless line or never-finished request grows its
// buffer without bound, and its inline parser allocates quadratically in
// the number of words on a line. The guard replaces that reader (redcon
// remains the reply encoder):
//
//   - Validator is an incremental state machine over the request stream. It
//     checks framing as bytes arrive, enforcing Redis' limits with Redis' own
//     error texts, and buffers only what it must (at most one inline line).
//     Inline requests are split the way Redis splits them (sdssplitargs).
//   - Framer reads a connection into one buffer and runs the Validator over
//     it once; the Validator records where each argument lies, so the Framer
//     hands each complete request over as slices of the buffer, without
//     copying or parsing again. Empty requests ("*0", "*-1", blank lines)
//     are skipped, as Redis skips them.
//
// On a violation the caller writes "-ERR Protocol error: <reason>\r\n" (the
// sentinel's text after "guard: ") after the replies to the requests before
// it, and closes the connection; other connections never notice.
//
// Before authentication (when a password is configured) the stricter Redis
// limits apply: at most 10 arguments and 16384-byte bulks, for inline
// requests too (a sluice addition: Redis checks multibulk headers only).
// The caller flips a Framer with SetAuthenticated after a successful AUTH;
// Next returns one request at a time, so an AUTH takes effect for the very
// next request of the same pipeline.
package guard
