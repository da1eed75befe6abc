package resp

import (
	"fmt"
	"strings"
)

// Reply texts that clients match on; the words are Redis'.
const (
	ErrNotInteger = "ERR value is not an integer or out of range"
	ErrSyntax     = "ERR syntax error"
	ErrWrongType  = "WRONGTYPE Operation against a key holding the wrong kind of value"
	ErrOverflow   = "ERR value is out of range: seconds overflow int64 nanoseconds"
)

// ErrArity is Redis' reply to a command called with the wrong number of
// arguments; name is the command's full name ("client|setname").
func ErrArity(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

// ErrUnknownCommand is Redis' reply to a command it does not know.
func ErrUnknownCommand(args [][]byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ERR unknown command '%s', with args beginning with: ", Clip(args[0], 128))
	for _, a := range args[1:] {
		if b.Len() > 200 {
			break
		}
		fmt.Fprintf(&b, "'%s' ", Clip(a, 128))
	}
	return b.String()
}

// Clip is b cut to n bytes, as one line: error replies quote client
// bytes, which must not break the reply.
func Clip(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(string(b))
}
