package commands

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/slot"
)

func serverCommands() []*Command {
	return []*Command{
		{Spec: cmdspec.Spec{Name: "info", Arity: -1, Flags: []string{"loading", "stale"}, Group: "server", Since: "1.0.0",
			Summary: "Returns information and statistics about the server.", Complexity: "O(1)",
			Tips:          []string{"nondeterministic_output", "request_policy:all_shards", "response_policy:special"},
			ACLCategories: []string{"@dangerous"},
			Args:          []Arg{{Name: "section", Type: "string", Optional: true, Multiple: true}}}, Run: runInfo},
		{Spec: cmdspec.Spec{Name: "time", Arity: 1, Flags: []string{"loading", "stale", "fast"}, Group: "server", Since: "2.6.0",
			Summary: "Returns the server time (the test clock when it is set).", Complexity: "O(1)", Tips: []string{"nondeterministic_output"}}, Run: runTime},
		// Waits: DIGEST walks every key, GC stops the world, SLEEP sleeps;
		// none of that may hold up the event loop's other clients.
		{Spec: cmdspec.Spec{Name: "debug", Arity: -2, Flags: []string{"admin", "noscript", "loading", "stale"}, Group: "server",
			Since: "1.0.0", Summary: "DEBUG DIGEST, DEBUG DIGEST-SLOTS <from> <to>; test hooks: DEBUG CLOCK SET <unix-ns> | ADVANCE <ns> | GET | REAL, DEBUG GC, DEBUG SLEEP <seconds>, DEBUG APPLY-PANIC <key>. Needs --enable-debug-command.",
			Complexity: "O(1)", Args: []Arg{{Name: "subcommand", Type: "string"},
				{Name: "arg", Type: "string", Optional: true, Multiple: true}}}, Waits: true, Run: runDebug},
		commandCommand(),
		configCommand(),
	}
}

func runTime(c *Ctx, _ [][]byte) {
	now := c.Now()
	c.W.Array(2)
	c.W.BulkString(strconv.FormatInt(now/1e9, 10))
	c.W.BulkString(strconv.FormatInt(now%1e9/1e3, 10))
}

// runDebug is DEBUG DIGEST (always: a read-only check that replicas hold
// the same state), and, with --enable-debug-command, DEBUG GC and the test
// clock DEBUG CLOCK SET <unix-ns> | ADVANCE <ns> | GET | REAL that
// end-to-end tests use instead of sleeping.
func runDebug(c *Ctx, args [][]byte) {
	if equalFold(args[1], "digest") && len(args) == 2 {
		d, err := c.Env.Machine.Digest()
		if err != nil {
			c.W.Error(errorReply(err))
			return
		}
		c.W.Simple(d)
		return
	}
	if equalFold(args[1], "digest-slots") {
		debugDigestSlots(c, args)
		return
	}
	if !c.Env.Options.EnableDebug {
		c.W.Error(errDebugDenied)
		return
	}
	if equalFold(args[1], "apply-panic") && c.Env.Table.applyPanic != nil {
		// A machine command: through the log like any write, then a
		// panic inside its apply, which the apply boundary answers.
		if len(args) != 3 {
			c.W.Error(errArity("debug|apply-panic"))
			return
		}
		c.apply(c.Env.Table.applyPanic, args)
		return
	}
	if equalFold(args[1], "slotmove-hold") && len(args) == 3 {
		// Stops this member's slot migrations after a step, so a test can
		// kill or cut a member exactly there.
		if c.Env.Migrations == nil {
			c.W.Error(errNotSharded)
			return
		}
		if err := c.Env.Migrations.HoldAfter(strings.ToLower(string(args[2]))); err != nil {
			c.W.Error(c.migrationError(err))
			return
		}
		c.W.OK()
		return
	}
	if equalFold(args[1], "gc") && len(args) == 2 {
		// Lets benchmarks measure live memory rather than garbage.
		runtime.GC()
		c.W.OK()
		return
	}
	if equalFold(args[1], "sleep") && len(args) == 3 {
		debugSleep(c, args[2])
		return
	}
	if !equalFold(args[1], "clock") || len(args) < 3 {
		c.W.Error("ERR DEBUG supports only DIGEST | DIGEST-SLOTS <from> <to> | SLOTMOVE-HOLD <cut|import|none> | GC | SLEEP <seconds> | APPLY-PANIC <key> | CLOCK SET <unix-ns> | CLOCK ADVANCE <ns> | CLOCK REAL | CLOCK GET")
		return
	}
	clk := c.Env.Clock
	switch {
	case equalFold(args[2], "set") && len(args) == 4:
		ns, ok := parseInt(args[3])
		if !ok || ns <= 0 {
			c.W.Error(errNotInteger)
			return
		}
		if err := clk.Freeze(ns); err != nil {
			c.W.Error("ERR the clock cannot go back: it is at " + strconv.FormatInt(clk.Now(), 10) + ", after " + strconv.FormatInt(ns, 10))
			return
		}
		c.W.Int(clk.Now())
	case equalFold(args[2], "advance") && len(args) == 4:
		ns, ok := parseInt(args[3])
		if !ok || ns < 0 {
			c.W.Error(errNotInteger)
			return
		}
		now, err := clk.Advance(ns)
		if err != nil {
			c.W.Error("ERR advancing the clock at " + strconv.FormatInt(clk.Now(), 10) + " by " + strconv.FormatInt(ns, 10) + " ns overflows it")
			return
		}
		c.W.Int(now)
	case equalFold(args[2], "real") && len(args) == 3:
		clk.Release()
		c.W.OK()
	case equalFold(args[2], "get") && len(args) == 3:
		c.W.Int(clk.Now())
	default:
		c.W.Error(errSyntax)
	}
}

// maxDebugSleep bounds DEBUG SLEEP.
const maxDebugSleep = time.Hour

// debugSleep is DEBUG SLEEP <seconds> (decimals allowed, as in Redis). In
// Redis it stops the whole server; here it holds only the connection that
// sent it (the command Waits, so the event loop runs it aside), which is
// what tests use it for: a command that takes long must not hold up other
// clients.
func debugSleep(c *Ctx, arg []byte) {
	secs, err := strconv.ParseFloat(string(arg), 64)
	if err != nil || secs < 0 || secs > maxDebugSleep.Seconds() {
		c.W.Error("ERR DEBUG SLEEP takes seconds between 0 and " + strconv.Itoa(int(maxDebugSleep.Seconds())))
		return
	}
	time.Sleep(time.Duration(secs * float64(time.Second)))
	c.W.OK()
}

func (t *Table) limitedTotal() int64 {
	var n int64
	for _, c := range t.sorted {
		n += c.Limited()
	}
	return n
}

func executable() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	return p
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// debugDigestSlots is DEBUG DIGEST-SLOTS <from> <to>: the digest of the
// counters in slots from to to and their count, [digest, keys]. Equal on a
// migration's source at the cut-over and on its target after the import.
func debugDigestSlots(c *Ctx, args [][]byte) {
	if len(args) != 4 {
		c.W.Error(errArity("debug|digest-slots"))
		return
	}
	from, err1 := strconv.Atoi(string(args[2]))
	to, err2 := strconv.Atoi(string(args[3]))
	if err1 != nil || err2 != nil || from < 0 || to < from || to >= slot.Count {
		c.W.Error("ERR DEBUG DIGEST-SLOTS takes <from> <to>, slots 0 to 16383, from ≤ to")
		return
	}
	d, n, err := c.Env.Machine.DigestSlots(from, to)
	if err != nil {
		c.W.Error(errorReply(err))
		return
	}
	c.W.Array(2)
	c.W.BulkString(d)
	c.W.Int(int64(n))
}
