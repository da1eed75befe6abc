package machine

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-rl/sluice/resp"
)

// A panic inside an apply answers the internal error, leaves the change
// made before it, releases the slot, and the machine goes on: the same
// slot is usable at once, and two machines fed the same commands agree.
func TestApplyPanicIsAnError(t *testing.T) {
	var logged bytes.Buffer
	m := New(Options{Log: slog.New(slog.NewTextHandler(&logged, nil))})
	ref := New(Options{})
	cmds := [][]string{
		{"CL.THROTTLE", "{s}a", "5", "10", "60"},
		{"DEBUG", "APPLY-PANIC", "{s}k"},
		{"CL.THROTTLE", "{s}a", "5", "10", "60"},
		{"TYPE", "{s}k"},
		{"DEBUG", "apply-panic", "{s}k"},
	}
	want := []string{
		"*5\r\n:0\r\n:6\r\n:5\r\n:-1\r\n:6\r\n",
		"-ERR internal error in debug|apply-panic\r\n",
		"*5\r\n:0\r\n:6\r\n:4\r\n:-1\r\n:12\r\n",
		"+gcra\r\n",
		"-ERR internal error in debug|apply-panic\r\n",
	}
	for i, c := range cmds {
		if got := do(m, t0+int64(i), c...); got != want[i] {
			t.Errorf("%q: %q, want %q", c, got, want[i])
		}
		do(ref, t0+int64(i), c...)
	}
	if got := m.Lookup([]byte("DEBUG")).Panics(); got != 2 {
		t.Fatalf("panics counted: %d, want 2", got)
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "command=debug|apply-panic") || !strings.Contains(lines[0], "runDebugApplyPanic") {
		t.Fatalf("log: %d lines, want one per panic with its stack:\n%s", len(lines), logged.String())
	}
	// The slot is free: a digest locks every slot.
	da, err := m.Digest()
	if err != nil {
		t.Fatal(err)
	}
	db, _ := ref.Digest()
	if da != db {
		t.Fatalf("digests differ after the same panicking commands: %s / %s", da, db)
	}
}

// Concurrent applies on one slot keep working while some of them panic:
// no lock is left held, none is released twice.
func TestApplyPanicReleasesLocks(t *testing.T) {
	m := New(Options{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sc Scratch
			var w resp.Writer
			for i := range 200 {
				w.Buf = w.Buf[:0]
				args := [][]byte{[]byte("CL.THROTTLE"), []byte("{same}k"), []byte("100"), []byte("1000"), []byte("1")}
				if (i+g)%3 == 0 {
					args = [][]byte{[]byte("DEBUG"), []byte("APPLY-PANIC"), []byte("{same}p")}
				}
				cmd := m.Lookup(args[0])
				m.ApplyScratch(&sc, t0+int64(i), cmd, args, &w)
				if w.Buf[0] == '-' && (i+g)%3 != 0 {
					t.Errorf("%q: %q", args, w.Buf)
					return
				}
			}
		}()
	}
	wg.Wait()
	if _, err := m.Digest(); err != nil {
		t.Fatal(err)
	}
}

// The internal command is not listed as a surface command's twin, and its
// name in the error follows the subcommand words.
func TestPanicNames(t *testing.T) {
	m := New(Options{})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"debug", "APPLY-PANIC", "k"}, "debug|apply-panic"},
		{[]string{"rl.rules", "List"}, "rl.rules|list"},
		{[]string{"rl.rules", "nope"}, "rl.rules"},
		{[]string{"cl.throttle", "k", "1", "1", "1"}, "cl.throttle"},
	} {
		args := words(c.args...)
		if got := m.Lookup(args[0]).panicName(args); got != c.want {
			t.Errorf("%q: %q, want %q", c.args, got, c.want)
		}
	}
	if !m.Lookup([]byte("debug")).Internal() {
		t.Fatal("DEBUG APPLY-PANIC must be internal to the machine")
	}
}

func words(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, w := range s {
		out[i] = []byte(w)
	}
	return out
}
