package commands

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-rl/sluice/keyspace"
)

// Reply texts that clients match on; the words are Redis'.
const (
	errNotInteger  = "ERR value is not an integer or out of range"
	errSyntax      = "ERR syntax error"
	errWrongType   = "WRONGTYPE Operation against a key holding the wrong kind of value"
	errNoAuth      = "NOAUTH Authentication required."
	errWrongPass   = "WRONGPASS invalid username-password pair or user is disabled."
	errNoPassword  = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	errNoProto     = "NOPROTO unsupported protocol version"
	errDBIndex     = "ERR DB index is out of range"
	errDebugDenied = "ERR DEBUG command not allowed. Start sluice with --enable-debug-command to use it."
	errTimeout     = "ERR timeout is not an integer or out of range"
	errOverflow    = "ERR value is out of range: seconds overflow int64 nanoseconds"
)

// errArity is Redis' reply to a command called with the wrong number of
// arguments; name is the command's full name ("client|setname").
func errArity(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

// errUnknownCommand is Redis' reply to a command it does not know.
func errUnknownCommand(args [][]byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ERR unknown command '%s', with args beginning with: ", clip(args[0], 128))
	for _, a := range args[1:] {
		if b.Len() > 200 {
			break
		}
		fmt.Fprintf(&b, "'%s' ", clip(a, 128))
	}
	return b.String()
}

// errUnknownSubcommand is Redis' reply to a container command (CLIENT,
// CLUSTER …) given a subcommand it does not know.
func errUnknownSubcommand(container string, sub []byte) string {
	return fmt.Sprintf("ERR unknown subcommand '%s'. Try %s HELP.", clip(sub, 128), strings.ToUpper(container))
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		b = b[:n]
	}
	// Error replies are one line: keep the client's bytes from breaking it.
	if strings.ContainsAny(string(b), "\r\n") {
		return []byte(strings.NewReplacer("\r", " ", "\n", " ").Replace(string(b)))
	}
	return b
}

// errorReply turns an error from an algorithm or the keyspace into a RESP
// error: WRONGTYPE for a key of another kind, else "ERR" and the message
// without its package prefix ("gcra: zero rates …" → "ERR zero rates …").
func errorReply(err error) string {
	if errors.Is(err, keyspace.ErrWrongType) {
		return errWrongType
	}
	msg := err.Error()
	if i := strings.Index(msg, ": "); i > 0 && !strings.ContainsAny(msg[:i], " ") {
		msg = msg[i+2:]
	}
	return "ERR " + msg
}
