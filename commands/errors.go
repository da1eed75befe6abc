package commands

import (
	"fmt"
	"strings"

	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/resp"
)

// Reply texts that clients match on; the words are Redis'.
const (
	errNotInteger  = resp.ErrNotInteger
	errSyntax      = resp.ErrSyntax
	errNoAuth      = "NOAUTH Authentication required."
	errWrongPass   = "WRONGPASS invalid username-password pair or user is disabled."
	errNoPassword  = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	errNoProto     = "NOPROTO unsupported protocol version"
	errDBIndex     = "ERR DB index is out of range"
	errDebugDenied = "ERR DEBUG command not allowed. Start sluice with --enable-debug-command to use it."
	errTimeout     = "ERR timeout is not an integer or out of range"
)

// Helpers shared with the machine's commands.
var (
	errArity          = resp.ErrArity
	errUnknownCommand = resp.ErrUnknownCommand
	errorReply        = machine.ErrorReply
	parseInt          = resp.ParseInt
	equalFold         = resp.EqualFold
	lower             = resp.Lower
	clip              = resp.Clip
)

// errUnknownSubcommand is Redis' reply to a container command (CLIENT,
// CLUSTER …) given a subcommand it does not know.
func errUnknownSubcommand(container string, sub []byte) string {
	return fmt.Sprintf("ERR unknown subcommand '%s'. Try %s HELP.", clip(sub, 128), strings.ToUpper(container))
}
