package commands

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected replies in testdata/scenarios")

// TestScenarios replays the command scripts in testdata/scenarios against a
// fresh Env on a frozen clock and compares every reply. A script is lines
// of:
//
//	clock <unix-ns>          freeze the clock there
//	advance <duration>       move it forward (Go duration: 1s, 500ms, 1ns)
//	<COMMAND args…>          run a command; the next line holds its reply:
//	=> <reply>               ints as 5, arrays as [a b], errors as (error) …,
//	                         bulk strings quoted, nulls as (nil), +OK as OK
//
// Blank lines and # comments are kept. Because a command's reply depends only
// on the state, the arguments and the instant, the same script must give the
// same replies on every run and every machine.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScenario(t, file) })
	}
}

func runScenario(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := testEnv()
	c := testCtx(env)
	var out []string
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		fields := strings.Fields(text)
		switch {
		case strings.HasPrefix(text, "=> "):
			continue // an old reply: the command line before it wrote the new one
		case len(fields) == 0 || strings.HasPrefix(fields[0], "#"):
			out = append(out, text)
			continue
		case fields[0] == "clock" && len(fields) == 2:
			ns, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatalf("%s:%d: %v", file, line, err)
			}
			if err := env.Clock.Freeze(ns); err != nil {
				t.Fatalf("%s:%d: %v", file, line, err)
			}
			out = append(out, text)
			continue
		case fields[0] == "advance" && len(fields) == 2:
			d, err := time.ParseDuration(fields[1])
			if err != nil {
				t.Fatalf("%s:%d: %v", file, line, err)
			}
			if _, err := env.Clock.Advance(int64(d)); err != nil {
				t.Fatalf("%s:%d: %v", file, line, err)
			}
			out = append(out, text)
			continue
		}
		args := make([][]byte, len(fields))
		for i, f := range fields {
			args[i] = []byte(f)
		}
		c.Reset()
		c.W.Buf = c.W.Buf[:0]
		env.Table.Dispatch(c, args)
		reply, rest, err := renderRESP(c.W.Buf)
		if err != nil || len(rest) != 0 {
			t.Fatalf("%s:%d: %s wrote a malformed reply %q: %v", file, line, text, c.W.Buf, err)
		}
		out = append(out, text, "=> "+reply)
	}
	got := strings.Join(out, "\n") + "\n"
	if *rewrite {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, _ := os.ReadFile(file)
	if got != string(want) {
		t.Errorf("%s: replies differ (go test -run TestScenarios -rewrite to accept):\n%s", file, diffLines(string(want), got))
	}
}

// renderRESP renders one RESP2 reply as scenario text.
func renderRESP(b []byte) (string, []byte, error) {
	if len(b) == 0 {
		return "", b, fmt.Errorf("empty reply")
	}
	end := strings.Index(string(b), "\r\n")
	if end < 0 {
		return "", b, fmt.Errorf("unterminated line")
	}
	head, rest := string(b[1:end]), b[end+2:]
	switch b[0] {
	case '+':
		return head, rest, nil
	case '-':
		return "(error) " + head, rest, nil
	case ':':
		return head, rest, nil
	case '$':
		n, _ := strconv.Atoi(head)
		if n < 0 {
			return "(nil)", rest, nil
		}
		if len(rest) < n+2 {
			return "", rest, fmt.Errorf("short bulk")
		}
		return strconv.Quote(string(rest[:n])), rest[n+2:], nil
	case '*':
		n, _ := strconv.Atoi(head)
		if n < 0 {
			return "(nil)", rest, nil
		}
		parts := make([]string, n)
		for i := range parts {
			var err error
			if parts[i], rest, err = renderRESP(rest); err != nil {
				return "", rest, err
			}
		}
		return "[" + strings.Join(parts, " ") + "]", rest, nil
	}
	return "", rest, fmt.Errorf("unknown reply type %q", b[0])
}

func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %s\n  got  %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
