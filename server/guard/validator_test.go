package guard

import (
	"errors"
	"strings"
	"testing"
)

type streamCase struct {
	name     string
	stream   string
	limits   *Limits // nil: DefaultLimits
	unauth   bool
	reqs     [][]string
	err      error  // nil when the stream is accepted
	errText  string // when set, the exact reply reason (after "Protocol error: ")
	complete bool   // accepted and ends between requests
}

func r(args ...string) []string { return args }

var streamCases = []streamCase{
	// Multibulk, accepted.
	{name: "ping", stream: "*1\r\n$4\r\nPING\r\n", reqs: [][]string{r("PING")}, complete: true},
	{name: "pipeline", stream: "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
		reqs: [][]string{r("PING"), r("GET", "k")}, complete: true},
	{name: "empty bulk", stream: "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n", reqs: [][]string{r("SET", "k", "")}, complete: true},
	{name: "binary payload", stream: "*1\r\n$6\r\na\r\nb\x00\n\r\n", reqs: [][]string{r("a\r\nb\x00\n")}, complete: true},
	{name: "star zero skipped", stream: "*0\r\n*1\r\n$4\r\nPING\r\n", reqs: [][]string{r("PING")}, complete: true},
	{name: "star minus one skipped", stream: "*-1\r\n", complete: true},
	{name: "most negative count skipped", stream: "*-9223372036854775808\r\n", complete: true},
	{name: "max args header", stream: "*1048576\r\n"},
	{name: "max bulk header", stream: "*1\r\n$536870912\r\n"},
	{name: "half a command", stream: "*3\r\n$3\r\nfoo", reqs: nil},
	{name: "payload waits for CR", stream: "*1\r\n$1\r\na"},
	{name: "payload waits for LF", stream: "*1\r\n$1\r\na\r"},
	{name: "count waits for LF", stream: "*1\r"},
	{name: "count line at the limit waits", stream: "*" + strings.Repeat("1", DefaultMaxInlineLen-1)},
	{name: "bulk line at the limit waits", stream: "*1\r\n$" + strings.Repeat("1", DefaultMaxInlineLen-1)},
	{name: "junk count waits for CR like Redis", stream: "*abc"},

	// Multibulk, refused.
	{name: "bulk length beyond int64", stream: "*1\r\n$99999999999999999999\r\n", err: ErrInvalidBulkLength},
	{name: "bulk length max int64", stream: "*1\r\n$9223372036854775807\r\nabc", err: ErrInvalidBulkLength},
	{name: "count max int64", stream: "*9223372036854775807\r\n", err: ErrInvalidMultibulkLength},
	{name: "count beyond int64", stream: "*99999999999999999999\r\n", err: ErrInvalidMultibulkLength},
	{name: "ten million args", stream: "*10000000\r\n", err: ErrInvalidMultibulkLength},
	{name: "one past max args", stream: "*1048577\r\n", err: ErrInvalidMultibulkLength},
	{name: "negative bulk", stream: "*1\r\n$-1\r\n", err: ErrInvalidBulkLength},
	{name: "one past max bulk", stream: "*1\r\n$536870913\r\n", err: ErrInvalidBulkLength},
	{name: "count not a number", stream: "*abc\r\n", err: ErrInvalidMultibulkLength},
	{name: "count empty", stream: "*\r\n", err: ErrInvalidMultibulkLength},
	{name: "count leading zero", stream: "*01\r\n", err: ErrInvalidMultibulkLength},
	{name: "count plus sign", stream: "*+1\r\n", err: ErrInvalidMultibulkLength},
	{name: "count minus zero", stream: "*-0\r\n", err: ErrInvalidMultibulkLength},
	{name: "count with space", stream: "*1 \r\n", err: ErrInvalidMultibulkLength},
	{name: "count LF without CR", stream: "*1\n", err: ErrInvalidMultibulkLength},
	{name: "count CR without LF", stream: "*1\rX", err: ErrInvalidMultibulkLength},
	{name: "expected dollar", stream: "*1\r\nX", err: ErrExpectedDollar, errText: "expected '$', got 'X'"},
	{name: "expected dollar got CR", stream: "*1\r\n\r\n", err: ErrExpectedDollar, errText: "expected '$', got ' '"},
	{name: "expected dollar got high byte", stream: "*1\r\n\xff", err: ErrExpectedDollar, errText: "expected '$', got '\xff'"},
	{name: "bulk empty length", stream: "*1\r\n$\r\n", err: ErrInvalidBulkLength},
	{name: "bulk LF without CR", stream: "*1\r\n$3\n", err: ErrInvalidBulkLength},
	{name: "bulk CR without LF", stream: "*1\r\n$3\rX", err: ErrInvalidBulkLength},
	{name: "payload too long", stream: "*1\r\n$3\r\nabcd\r\n", err: ErrInvalidBulkLength},
	{name: "payload CR then junk", stream: "*1\r\n$3\r\nabc\rX", err: ErrInvalidBulkLength},
	{name: "count line too long", stream: "*" + strings.Repeat("1", DefaultMaxInlineLen), err: ErrTooBigMbulkCount,
		errText: "too big mbulk count string"},
	{name: "bulk line too long", stream: "*1\r\n$" + strings.Repeat("1", DefaultMaxInlineLen), err: ErrTooBigBulkCount,
		errText: "too big bulk count string"},
	{name: "good then bad", stream: "*1\r\n$1\r\na\r\n*1\r\nX", reqs: [][]string{r("a")}, err: ErrExpectedDollar},

	// Inline, accepted: sdssplitargs' rules.
	{name: "inline crlf", stream: "PING\r\n", reqs: [][]string{r("PING")}, complete: true},
	{name: "inline lf", stream: "PING\n", reqs: [][]string{r("PING")}, complete: true},
	{name: "inline words", stream: "  set  k\tv \r\n", reqs: [][]string{r("set", "k", "v")}, complete: true},
	{name: "inline quoted", stream: "set k \"a b\"\r\n", reqs: [][]string{r("set", "k", "a b")}, complete: true},
	{name: "blank lines skipped", stream: "\r\n\n  \t\r\nPING\n", reqs: [][]string{r("PING")}, complete: true},
	{name: "double quote escapes", stream: `"\x41\x4a\n\t\\\"\b\a\q"` + "\n",
		reqs: [][]string{r("AJ\n\t\\\"\b\aq")}, complete: true},
	{name: "bad hex escapes", stream: `"\x4g" "\xZ" "\x"` + "\n", reqs: [][]string{r("x4g", "xZ", "x")}, complete: true},
	{name: "single quotes", stream: `'it\'s' 'a\nb' 'a\\b'` + "\n", reqs: [][]string{r("it's", `a\nb`, `a\\b`)}, complete: true},
	{name: "backslash quote ends nothing in single quotes", stream: `'\\'` + "\n", err: ErrUnbalancedQuotes},
	{name: "empty quoted args", stream: "\"\" ''\n", reqs: [][]string{r("", "")}, complete: true},
	{name: "quote inside word", stream: "a\"b c\" d\n", reqs: [][]string{r("ab c", "d")}, complete: true},
	{name: "NUL ends the line", stream: "GET a\x00b c\r\n", reqs: [][]string{r("GET", "a")}, complete: true},
	{name: "NUL first", stream: "\x00PING\r\n", complete: true},
	{name: "lone CR separates", stream: "a\rb\r\n", reqs: [][]string{r("a", "b")}, complete: true},
	{name: "CR inside quotes kept", stream: "\"a\rb\"\r\n", reqs: [][]string{r("a\rb")}, complete: true},
	{name: "two CRs: one is the ending", stream: "\"ab\"\r\r\n", reqs: [][]string{r("ab")}, complete: true},
	{name: "vertical tab kept inside words", stream: "\va\vb\v\r\n", reqs: [][]string{r("a\vb\v")}, complete: true},
	{name: "star later in line is inline", stream: "GET *\r\n", reqs: [][]string{r("GET", "*")}, complete: true},
	{name: "inline at the limit", stream: strings.Repeat("a", DefaultMaxInlineLen) + "\n",
		reqs: [][]string{r(strings.Repeat("a", DefaultMaxInlineLen))}, complete: true},
	{name: "inline then multibulk", stream: "PING\r\n*1\r\n$4\r\nPING\r\n", reqs: [][]string{r("PING"), r("PING")}, complete: true},
	{name: "unfinished inline", stream: "PIN"},

	// Inline, refused.
	{name: "inline too long", stream: strings.Repeat("a", DefaultMaxInlineLen+1), err: ErrTooBigInline,
		errText: "too big inline request"},
	{name: "unterminated quote", stream: "\"abc\r\n", err: ErrUnbalancedQuotes, errText: "unbalanced quotes in request"},
	{name: "text after closing quote", stream: "\"abc\"def\r\n", err: ErrUnbalancedQuotes},
	{name: "NUL inside quotes", stream: "\"a\x00\"\r\n", err: ErrUnbalancedQuotes},
	{name: "backslash at end of quote", stream: "\"a\\\n", err: ErrUnbalancedQuotes},
	{name: "quote error waits for the line", stream: "\"abc\"def"},
	{name: "too long beats bad quotes", stream: "\"a\"b" + strings.Repeat(" ", DefaultMaxInlineLen), err: ErrTooBigInline},

	// Small limits.
	{name: "inline words at the limit", limits: ptr(smallLimits()), stream: "a b c d e f g h\n",
		reqs: [][]string{r("a", "b", "c", "d", "e", "f", "g", "h")}, complete: true},
	{name: "inline too many words", limits: ptr(smallLimits()), stream: "a b c d e f g h i\n", err: ErrTooBigInline},
	{name: "quotes beat too many words", limits: ptr(smallLimits()), stream: "a b c d e f g h i \"\n", err: ErrUnbalancedQuotes},
	{name: "count line at small limit", limits: ptr(smallLimits()), stream: "*" + strings.Repeat("x", 63)},
	{name: "count line past small limit", limits: ptr(smallLimits()), stream: "*" + strings.Repeat("x", 64), err: ErrTooBigMbulkCount},

	// Before authentication.
	{name: "unauth ten args", unauth: true, stream: "*10\r\n"},
	{name: "unauth eleven args", unauth: true, stream: "*11\r\n", err: ErrUnauthMultibulkLength,
		errText: "unauthenticated multibulk length"},
	{name: "unauth bulk 16384", unauth: true, stream: "*1\r\n$16384\r\n"},
	{name: "unauth bulk 16385", unauth: true, stream: "*1\r\n$16385\r\n", err: ErrUnauthBulkLength,
		errText: "unauthenticated bulk length"},
	{name: "unauth invalid beats unauth", unauth: true, stream: "*99999999999999999999\r\n", err: ErrInvalidMultibulkLength},
	{name: "unauth negative count skipped", unauth: true, stream: "*-5\r\n", complete: true},
	{name: "unauth inline ten words", unauth: true, stream: "a b c d e f g h i j\n",
		reqs: [][]string{r("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")}, complete: true},
	{name: "unauth inline eleven words", unauth: true, stream: "a b c d e f g h i j k\n", err: ErrUnauthMultibulkLength,
		errText: "unauthenticated multibulk length"},
	{name: "unauth inline word 16384", unauth: true, stream: "AUTH " + strings.Repeat("p", 16384) + "\r\n",
		reqs: [][]string{r("AUTH", strings.Repeat("p", 16384))}, complete: true},
	{name: "unauth inline word 16385", unauth: true, stream: "AUTH " + strings.Repeat("p", 16385) + "\r\n", err: ErrUnauthBulkLength,
		errText: "unauthenticated bulk length"},
	{name: "authed inline is not limited so", stream: "a b c d e f g h i j k l\n",
		reqs: [][]string{r("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l")}, complete: true},
}

func ptr[T any](v T) *T { return &v }

func (c streamCase) limitsOrDefault() Limits {
	if c.limits != nil {
		return *c.limits
	}
	return DefaultLimits()
}

func TestValidatorStreams(t *testing.T) {
	for _, c := range streamCases {
		t.Run(c.name, func(t *testing.T) {
			l := c.limitsOrDefault()
			whole := transcode(t, l, !c.unauth, []byte(c.stream))
			checkVerdict(t, c, whole)
			if ref := refParse([]byte(c.stream), l, !c.unauth); !equalReqs(ref.reqs, c.reqs) ||
				errText(ref.err) != errText(whole.err) || ref.complete != c.complete {
				t.Errorf("reference disagrees: %+v", ref)
			}
			// Every split reaches the same verdict. Long streams get the
			// byte-by-byte split and a sample of two-way splits.
			for i, chunks := range splits([]byte(c.stream)) {
				if len(c.stream) > 256 && i > 2 && i%997 != 0 {
					continue
				}
				if got := transcode(t, l, !c.unauth, chunks...); !got.equal(whole) {
					t.Fatalf("split %d (%d chunks) gave %.200q %v, whole gave %.200q %v",
						i, len(chunks), got.out, got.err, whole.out, whole.err)
				}
			}
		})
	}
}

func checkVerdict(t *testing.T, c streamCase, got verdict) {
	t.Helper()
	if !errors.Is(got.err, c.err) || c.err == nil && got.err != nil {
		t.Fatalf("error %v, want %v", got.err, c.err)
	}
	if c.errText != "" {
		if line := string(AppendReply(nil, got.err)); line != "-ERR Protocol error: "+c.errText+"\r\n" {
			t.Fatalf("reply %q, want reason %q", line, c.errText)
		}
	}
	if reqs := decodeWithRedcon(t, got.out); !equalReqs(reqs, c.reqs) {
		t.Fatalf("requests %q, want %q", reqs, c.reqs)
	}
	if complete := got.err == nil && got.atBoundary; complete != c.complete {
		t.Fatalf("complete = %v, want %v", complete, c.complete)
	}
}

func TestValidatorStuckAfterError(t *testing.T) {
	v, err := NewValidator(DefaultLimits(), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Next([]byte("*x\r\n")); !errors.Is(err, ErrInvalidMultibulkLength) {
		t.Fatalf("got %v", err)
	}
	if _, _, err := v.Next([]byte("*1\r\n$4\r\nPING\r\n")); !errors.Is(err, ErrInvalidMultibulkLength) {
		t.Fatalf("a validator must stay on its error, got %v", err)
	}
	v.Reset()
	if n, ev, err := v.Next([]byte("*1\r\n")); err != nil || ev != EventBody || n != 4 {
		t.Fatalf("after Reset: %d %v %v", n, ev, err)
	}
}

func TestValidatorAuthSwitch(t *testing.T) {
	v, err := NewValidator(DefaultLimits(), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Next([]byte("*11\r\n")); !errors.Is(err, ErrUnauthMultibulkLength) {
		t.Fatalf("got %v", err)
	}
	v.Reset()
	v.SetAuthenticated(true)
	if _, ev, err := v.Next([]byte("*11\r\n")); err != nil || ev != EventBody {
		t.Fatalf("authenticated: %v %v", ev, err)
	}
}

func TestParseNumberMatchesString2ll(t *testing.T) {
	for _, s := range []string{"", "0", "-0", "00", "01", "1", "-1", "+1", " 1", "1 ", "-", "--1", "1-",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"18446744073709551615", "18446744073709551616", "99999999999999999999", "123456789012345678901",
		"12a", "a"} {
		gotN, gotOK := parseNumber([]byte(s))
		wantN, wantOK := refString2ll([]byte(s))
		if gotN != wantN || gotOK != wantOK {
			t.Errorf("%q: got %d %v, string2ll gives %d %v", s, gotN, gotOK, wantN, wantOK)
		}
	}
	// Independent of the port: values Redis documents or obviously means.
	for s, want := range map[string]int64{"9223372036854775807": 1<<63 - 1, "-9223372036854775808": -1 << 63, "42": 42, "-7": -7} {
		if n, ok := parseNumber([]byte(s)); !ok || n != want {
			t.Errorf("%q: got %d %v", s, n, ok)
		}
	}
}
