package machine

import (
	"bytes"
	"fmt"
	"math/big"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
)

// TestApplyDataDriven runs the scripts in testdata/apply, in etcd-raft's
// style: each block applies commands at an instant and shows what the
// machine answered, or shows its state. Each script starts on an empty
// machine whose log is at this binary's apply level. Every command is
// applied to a twin as well — the machine restored from a snapshot taken
// before the block — and must answer alike (a restarted replica). Directives:
//
//	apply at=<seconds>            one command a line (words split on spaces,
//	                              "quoted" words Go-unquoted); one reply a line
//	rules name=<file> [at=…]      RL.RULES LOAD of the block's YAML
//	keys                          the live keys and their kinds, sorted
//	stores                        one command a line: "stores" when it could
//	                              add or grow a record (Machine.Stores: what
//	                              maxmemory refuses), else "in place";
//	                              nothing is applied
//	snapshot                      the machine replaced by a copy through a
//	                              snapshot (what a restarted replica holds)
//
// An error reply shows the reason the outcome gives it, in brackets (what
// the doors that are not RESP act on). at= is seconds after
// 2026-01-01T00:00:00Z, decimals allowed (0.25 is
// 250 ms), never earlier than the last given (the machine's time only goes
// forward); without it a block applies at the last instant given. Replies
// read as redis-cli prints them, on one line: 7, "text" (bulk), OK
// (status), (nil), (error) ERR …, [a b c]. Rewrite the expectations with
// go test ./machine -run TestApplyDataDriven -rewrite.
func TestApplyDataDriven(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "apply"), func(t *testing.T, path string) {
		// A log at this binary's apply level, as a cluster's is once its
		// members all run it.
		m := New(Options{})
		atLevel(m, Level)
		// twin is m restored from a snapshot before each block, given the
		// same commands: a replica that restarted from that snapshot must
		// answer alike.
		twin := snapshotCopy(t, m, nil)
		now := t0
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.HasArg("at") {
				var arg string
				d.ScanArgs(t, "at", &arg)
				at := t0 + seconds(t, arg)
				if at < now {
					// The machine never goes back: an earlier instant would
					// be applied at the later one, not as the script reads.
					d.Fatalf(t, "at= goes back in time")
				}
				now = at
			}
			defer func() { twin = snapshotCopy(t, m, nil) }()
			switch d.Cmd {
			case "apply":
				var out strings.Builder
				for _, line := range strings.Split(d.Input, "\n") {
					if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
						continue
					}
					words := splitWords(t, line)
					got := applyLine(m, now, words)
					if again := applyLine(twin, now, words); again != got {
						d.Fatalf(t, "%s: %s, and from a snapshot taken before the block %s", line, got, again)
					}
					out.WriteString(got)
					out.WriteByte('\n')
				}
				return out.String()
			case "rules":
				var name string
				d.ScanArgs(t, "name", &name)
				do(twin, now, "RL.RULES", "LOAD", name, d.Input)
				return render([]byte(do(m, now, "RL.RULES", "LOAD", name, d.Input))) + "\n"
			case "keys":
				return liveKeys(m, now)
			case "stores":
				var out strings.Builder
				for _, line := range strings.Split(d.Input, "\n") {
					if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
						continue
					}
					out.WriteString(storesLine(m, now, splitWords(t, line)))
					out.WriteByte('\n')
				}
				return out.String()
			case "snapshot":
				m = snapshotCopy(t, m, nil)
				return "ok\n"
			}
			d.Fatalf(t, "unknown directive %s", d.Cmd)
			return ""
		})
	})
}

// applyLine applies one command and renders its reply, an error's with
// the reason the outcome gives it ("(error) ERR … [invalid]").
func applyLine(m *Machine, now int64, words []string) string {
	args := make([][]byte, len(words))
	for i, w := range words {
		args[i] = []byte(w)
	}
	var w resp.Writer
	out := m.ApplyArgs(now, args, &w)
	line := render(w.Buf)
	if strings.HasPrefix(line, "(error) ") || out.Reason != ReasonNone {
		line += " [" + out.Reason.String() + "]"
	}
	return line
}

// storesLine says whether a well-formed command could store more; a
// malformed one shows the error it gets (Stores is asked only of those
// that pass Check).
func storesLine(m *Machine, now int64, words []string) string {
	args := make([][]byte, len(words))
	for i, w := range words {
		args[i] = []byte(w)
	}
	cmd := m.Lookup(args[0])
	if cmd == nil || !cmd.ArityOK(len(args)) {
		return "(error) unknown or of the wrong arity"
	}
	if bad := cmd.Check(args); bad != "" {
		return "(error) " + bad
	}
	if m.Stores(cmd, args, now) {
		return "stores"
	}
	return "in place"
}

// seconds reads a decimal number of seconds as nanoseconds, exactly.
func seconds(t *testing.T, s string) int64 {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("at=%s: not a number of seconds", s)
	}
	r.Mul(r, big.NewRat(1e9, 1))
	if !r.IsInt() || !r.Num().IsInt64() {
		t.Fatalf("at=%s: not a whole number of nanoseconds", s)
	}
	return r.Num().Int64()
}

// splitWords splits a command line on spaces; a word in double quotes is
// Go-unquoted (spaces, \r\n, "" for an empty word).
func splitWords(t *testing.T, line string) []string {
	t.Helper()
	var out []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' {
			end := 1
			for end < len(line) && (line[end] != '"' || line[end-1] == '\\') {
				end++
			}
			w, err := strconv.Unquote(line[:min(end+1, len(line))])
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			out = append(out, w)
			line = line[min(end+1, len(line)):]
			continue
		}
		w, rest, _ := strings.Cut(line, " ")
		out, line = append(out, w), rest
	}
	return out
}

// render prints a RESP reply on one line as redis-cli would.
func render(b []byte) string {
	s, rest := renderOne(b)
	if len(rest) != 0 {
		return s + fmt.Sprintf(" (and %d bytes more)", len(rest))
	}
	return s
}

func renderOne(b []byte) (string, []byte) {
	end := bytes.Index(b, []byte("\r\n"))
	if end < 1 {
		return fmt.Sprintf("(malformed %q)", b), nil
	}
	line, rest := string(b[1:end]), b[end+2:]
	switch b[0] {
	case '+':
		return line, rest
	case '-':
		return "(error) " + line, rest
	case ':':
		return line, rest
	case '$':
		n, _ := strconv.Atoi(line)
		if n < 0 {
			return "(nil)", rest
		}
		return strconv.Quote(string(rest[:n])), rest[n+2:]
	case '*':
		n, _ := strconv.Atoi(line)
		if n < 0 {
			return "(nil)", rest
		}
		parts := make([]string, n)
		for i := range parts {
			parts[i], rest = renderOne(rest)
		}
		return "[" + strings.Join(parts, " ") + "]", rest
	}
	return fmt.Sprintf("(malformed %q)", b), nil
}

// liveKeys lists the keys live at now with their kinds, sorted.
func liveKeys(m *Machine, now int64) string {
	var lines []string
	for i := range slot.Count {
		s := m.keys.Lock(i)
		s.Keys(max(now, m.Applied()), func(key []byte, e keyspace.Entry) bool {
			lines = append(lines, strconv.Quote(string(key))+" "+KindName(e.Kind()))
			return true
		})
		s.Unlock()
	}
	if len(lines) == 0 {
		return "(none)\n"
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}
