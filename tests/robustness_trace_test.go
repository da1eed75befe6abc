package tests

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The apply traces (failpoint apply-trace): every member writes a line
// per command it applies — the entry's index and stamp, the proposing
// process and its entry, the words, the reply's start. When a key's
// answers do not add up, the report lists the lines that name it, and the
// lines naming the reservation ids those carry (a part's cancel names
// only its id), so the entry no answer accounts for can be found.

// traceArg arms member i's apply trace, in a file of its own kept across
// its restarts.
func (rc *robustCluster) traceArg(t *testing.T, i int) string {
	for len(rc.traces) <= i {
		rc.traces = append(rc.traces, "")
	}
	if rc.traces[i] == "" {
		rc.traces[i] = filepath.Join(t.TempDir(), "apply-trace")
	}
	return ",apply-trace=append-to-" + rc.traces[i]
}

// traceWords are the words of an apply trace line (unquoted), and its
// head (index, stamp, proposal); ok is false for a line that is not one.
func traceWords(line string) (head string, words []string, ok bool) {
	i := strings.IndexByte(line, '"')
	if i < 0 {
		return "", nil, false
	}
	head, rest := line[:i], line[i:]
	for len(rest) > 0 && rest[0] == '"' {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return "", nil, false
		}
		w, _ := strconv.Unquote(q)
		words = append(words, w)
		rest = strings.TrimPrefix(rest[len(q):], " ")
		if strings.HasPrefix(rest, "-> ") {
			break
		}
	}
	return head, words, true
}

// reservationID is the id a traced command names: RL.PART's fourth word,
// RL.RESERVE's, RL.SETTLE's and RL.CANCEL's third.
func reservationID(words []string) string {
	switch {
	case len(words) > 3 && strings.EqualFold(words[0], "RL.PART"):
		return words[3]
	case len(words) > 2 && (strings.EqualFold(words[0], "RL.RESERVE") || strings.EqualFold(words[0], "RL.SETTLE") || strings.EqualFold(words[0], "RL.CANCEL")):
		return words[2]
	}
	return ""
}

// writeTraces writes, for each needle (a key, or a descriptor's value),
// the trace lines of every member that name it or an id those lines
// carry, into dir/apply-<n>.txt, each line led by its member (m1…);
// it returns the files' names.
func writeTraces(dir string, traces []string, needles []string) []string {
	var files []string
	for n, needle := range needles {
		ids := map[string]bool{}
		scan := func(near func(line string) bool, keep func(words []string) bool, each func(m int, line string)) {
			for m, path := range traces {
				f, err := os.Open(path)
				if err != nil {
					continue
				}
				sc := bufio.NewScanner(f)
				sc.Buffer(make([]byte, 64<<10), 1<<20)
				for sc.Scan() {
					line := sc.Text()
					if strings.HasPrefix(line, "#") {
						each(m, line)
						continue
					}
					if !near(line) {
						continue // not worth unquoting
					}
					if _, words, ok := traceWords(line); ok && keep(words) {
						each(m, line)
					}
				}
				f.Close()
			}
		}
		names := func(words []string) bool { return slices.Contains(words, needle) }
		scan(func(line string) bool { return strings.Contains(line, needle) }, names, func(_ int, line string) {
			if _, words, ok := traceWords(line); ok {
				if id := reservationID(words); id != "" {
					ids[id] = true
				}
			}
		})
		var b strings.Builder
		scan(func(line string) bool { return strings.Contains(line, needle) || strings.Contains(line, `"RL.`) }, func(words []string) bool {
			return ids[reservationID(words)] || names(words)
		}, func(m int, line string) { fmt.Fprintf(&b, "m%d %s\n", m+1, line) })
		name := fmt.Sprintf("apply-%d.txt", n+1)
		os.WriteFile(filepath.Join(dir, name), []byte("# the apply-trace lines naming "+strconv.Quote(needle)+" or an id they carry\n"+b.String()), 0o644)
		files = append(files, name)
	}
	return files
}

// writeTraces keeps the lines naming the needle and those naming the ids
// they carry — a part's cancel names only its id — from every member, and
// no other.
func TestWriteTracesFollowsIDs(t *testing.T) {
	dir := t.TempDir()
	m1 := filepath.Join(dir, "m1")
	m2 := filepath.Join(dir, "m2")
	os.WriteFile(m1, []byte(`# member g1n1 proposer 1f
10 1000 1f/3 "RL.PART" "RESERVE" "robust" "ID1" "10" "RL.CHECK" "robust" "DESCRIPTOR" "user" "u1.1" -> "*7\r\n"
11 1001 1f/4 "RL.PART" "RESERVE" "robust" "ID2" "10" "RL.CHECK" "robust" "DESCRIPTOR" "user" "u1.2" -> "*7\r\n"
12 1002 1f/5 "RL.PART" "CANCEL" "robust" "ID1" "10" "14297" -> ":1\r\n"
13 1003 1f/6 "CL.THROTTLE" "u1.1x" "1" -> ":0\r\n"
`), 0o644)
	os.WriteFile(m2, []byte(`# member g1n2 proposer 2e
14 1004 2e/1 "RL.RESERVE" "robust" "w1-1" "3600" "DESCRIPTOR" "user" "u1.1" -> "*7\r\n"
15 1005 2e/2 "RL.CANCEL" "robust" "w1-1" -> "*2\r\n"
16 1006 2e/3 "RL.PART" "CANCEL" "robust" "ID2" "10" "14297" -> ":1\r\n"
`), 0o644)
	files := writeTraces(dir, []string{m1, m2}, []string{"u1.1"})
	b, err := os.ReadFile(filepath.Join(dir, files[0]))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"m1 10 ", "m1 12 ", "m2 14 ", "m2 15 ", "m1 # member g1n1", "m2 # member g1n2"} {
		if !strings.Contains(got, want) {
			t.Errorf("no line %q in:\n%s", want, got)
		}
	}
	for _, not := range []string{"m1 11 ", "m1 13 ", "m2 16 "} {
		if strings.Contains(got, not) {
			t.Errorf("line %q kept in:\n%s", not, got)
		}
	}
}
