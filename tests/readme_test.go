package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeBlock is a console block of the README and how to run it.
type readmeBlock struct {
	line  int
	clock string
	rules string
	skip  bool
	lines []string
}

var readmeDirective = regexp.MustCompile(`^<!-- readme-test: (.*) -->$`)

// readmeBlocks finds the README's console blocks; each must follow a
// readme-test directive: clock=<unix ns> [rules=<path>], or skip.
func readmeBlocks(t *testing.T) []readmeBlock {
	src, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	var out []readmeBlock
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```console" {
			continue
		}
		b := readmeBlock{line: i + 1}
		m := []string(nil)
		if i > 0 {
			m = readmeDirective.FindStringSubmatch(lines[i-1])
		}
		if m == nil {
			t.Errorf("README.md:%d: a console block without a readme-test directive before it", i+1)
		} else {
			for _, f := range strings.Fields(m[1]) {
				switch {
				case f == "skip":
					b.skip = true
				case strings.HasPrefix(f, "clock="):
					b.clock = strings.TrimPrefix(f, "clock=")
				case strings.HasPrefix(f, "rules="):
					b.rules = strings.TrimPrefix(f, "rules=")
				}
			}
		}
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			b.lines = append(b.lines, lines[i])
		}
		out = append(out, b)
	}
	return out
}

// The README's console blocks are what a server answers: each runs its
// redis-cli lines against a fresh server at the block's clock and
// compares the output, so the examples cannot drift from the code.
func TestReadmeConsoleBlocks(t *testing.T) {
	blocks := readmeBlocks(t)
	ran := 0
	for _, b := range blocks {
		if b.skip {
			continue
		}
		var extra []string
		if b.rules != "" {
			extra = append(extra, "--rules", "../"+b.rules)
		}
		s := StartServer(t, extra...)
		if b.clock != "" {
			if err := s.Client().Do(ctx(t), "DEBUG", "CLOCK", "SET", b.clock).Err(); err != nil {
				t.Fatal(err)
			}
		}
		_, port, _ := strings.Cut(s.Addr, ":")
		for i := 0; i < len(b.lines); {
			cmdLine, ok := strings.CutPrefix(b.lines[i], "$ redis-cli ")
			if !ok {
				t.Fatalf("README.md:%d: %q is not a redis-cli command", b.line+1+i, b.lines[i])
			}
			cmdLine, _, _ = strings.Cut(cmdLine, "#")
			var want []string
			for i++; i < len(b.lines) && !strings.HasPrefix(b.lines[i], "$ "); i++ {
				want = append(want, b.lines[i])
			}
			out, err := exec.Command("redis-cli", append([]string{"--no-raw", "-p", port}, strings.Fields(cmdLine)...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("redis-cli %s: %v\n%s", cmdLine, err, out)
			}
			if got := strings.TrimRight(string(out), "\n"); got != strings.Join(want, "\n") {
				t.Errorf("README.md:%d: redis-cli %s answered\n%s\nthe README shows\n%s", b.line, strings.TrimSpace(cmdLine), got, strings.Join(want, "\n"))
			}
			ran++
		}
		s.Kill()
	}
	if ran < 5 {
		t.Fatalf("only %d README commands ran", ran)
	}
}

// The README's rule file is the one the examples load.
func TestReadmeRulesFileIsTheExample(t *testing.T) {
	src, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("../examples/rules/messaging.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "```yaml\n"+string(file)+"```") {
		t.Fatal("README.md's messaging.yaml block differs from examples/rules/messaging.yaml")
	}
}

// A bad flag value is one line naming it, not a usage dump.
func TestBadFlagIsOneLine(t *testing.T) {
	out, err := startMustFail(t, "--addr", freeAddr(t), "--data-dir", t.TempDir(), "--quota-fsync", "bogus")
	if err == nil {
		t.Fatal("started with --quota-fsync bogus")
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "quota-fsync") {
		t.Fatalf("output:\n%s", out)
	}
}

// A missing or broken rule file stops startup before the data directory
// is made.
func TestBadRulesTouchNothing(t *testing.T) {
	for _, rules := range []string{filepath.Join(t.TempDir(), "missing.yaml"), writeRules(t, "bad.yaml", "domain: [")} {
		dir := filepath.Join(t.TempDir(), "data")
		out, err := startMustFail(t, "--addr", freeAddr(t), "--data-dir", dir, "--rules", rules)
		if err == nil {
			t.Fatal("started")
		}
		if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
			t.Fatalf("--rules %s: the data directory was made before the error:\n%s", rules, out)
		}
		if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 {
			t.Fatalf("--rules %s:\n%s", rules, out)
		}
	}
}

// shBlocks are the README's ```sh blocks, each as its lines with their
// README line numbers.
func shBlocks(t *testing.T) map[int]string {
	src, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	in := false
	for i, l := range strings.Split(string(src), "\n") {
		switch {
		case l == "```sh":
			in = true
		case l == "```":
			in = false
		case in:
			out[i+1] = l
		}
	}
	return out
}

var (
	makeTarget  = regexp.MustCompile(`(?m)^([a-z-]+):`)
	repoPath    = regexp.MustCompile(`^(?:\./)?((?:bin|examples|scripts|deploy|docs|tests|cmd)/[\w./-]*)$`)
	probeAnswer = regexp.MustCompile("`GET /(healthz|readyz)` \\(200 `([^`]+)`(?:[^)]*503 `([^`]+)`)?")
	quotedWords = regexp.MustCompile(`"[^"]*"`)
)

// Every command the README's shell blocks show runs as written from the
// repository root: sluice is bin/sluice, each make target exists, and each
// path it names is in the repository (bin/sluice is what make build
// writes).
func TestReadmeShellBlocksRunAsWritten(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	lines := shBlocks(t)
	if len(lines) < 8 {
		t.Fatalf("only %d shell lines found", len(lines))
	}
	for n, l := range lines {
		cmd, _, _ := strings.Cut(l, "#")
		f := strings.Fields(quotedWords.ReplaceAllString(cmd, `""`))
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "sluice":
			t.Errorf("README.md:%d: %q runs a bare sluice: from the repository root it is bin/sluice", n, l)
		case "make":
			for _, w := range f[1:] {
				if !strings.Contains(w, "=") && !targets[w] {
					t.Errorf("README.md:%d: make has no target %q", n, w)
				}
			}
		}
		for _, w := range f {
			m := repoPath.FindStringSubmatch(w)
			if m == nil || m[1] == "bin/sluice" {
				continue
			}
			if _, err := os.Stat("../" + m[1]); err != nil {
				t.Errorf("README.md:%d: %s is not in the repository", n, m[1])
			}
		}
	}
}

// The probes answer the words the README quotes.
func TestReadmeProbeWords(t *testing.T) {
	src, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	quoted := map[string][]string{}
	for _, m := range probeAnswer.FindAllStringSubmatch(string(src), -1) {
		quoted[m[1]] = m[2:]
	}
	if len(quoted) != 2 {
		t.Fatalf("the README quotes the probes' answers %v, want both", quoted)
	}
	httpAddr := freeAddr(t)
	StartServer(t, "--http-addr", httpAddr)
	for probe, words := range quoted {
		if got := strings.TrimSpace(httpGet(t, "http://"+httpAddr+"/"+probe).body); got != words[0] {
			t.Errorf("/%s answers %q, the README says %q", probe, got, words[0])
		}
	}
	// A member with no leader is not ready, in the README's words.
	cl := NewCluster(t, 3)
	s, alone := cl.Nodes[0], freeAddr(t)
	s.Args = []string{"--data-dir", s.DataDir, "--node-id", "n1", "--peers", cl.Peers, "--http-addr", alone}
	s.Start()
	t.Cleanup(s.Kill)
	r := httpGet(t, "http://"+alone+"/readyz")
	if r.status != 503 || quoted["readyz"][1] == "" || strings.TrimSpace(r.body) != quoted["readyz"][1] {
		t.Errorf("/readyz without a leader: %d %q, the README says 503 %q", r.status, r.body, quoted["readyz"][1])
	}
}
