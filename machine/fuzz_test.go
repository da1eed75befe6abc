package machine

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/resp"
)

// examples has a well-formed call of every machine command: the fuzzer's
// seeds (with the README's redis-cli lines) and the base the malformed
// variants of the check test are built from.
var examples = map[string][]string{
	"cl.throttle":        {"CL.THROTTLE", "user123", "15", "30", "60", "2"},
	"sw.check":           {"SW.CHECK", "k", "10", "60", "COST", "2", "EXACT"},
	"fw.check":           {"FW.CHECK", "k", "10", "60", "COST", "2"},
	"conc.acquire":       {"CONC.ACQUIRE", "c", "2", "30", "r1"},
	"conc.release":       {"CONC.RELEASE", "c", "r1"},
	"conc.renew":         {"CONC.RENEW", "c", "r1", "30"},
	"conc.get":           {"CONC.GET", "c"},
	"quota.check":        {"QUOTA.CHECK", "acct:42", "10000", "MONTH", "ANCHOR", "1706659200", "TZ", "Europe/Berlin", "COST", "3"},
	"quota.get":          {"QUOTA.GET", "acct:42"},
	"quota.refund":       {"QUOTA.REFUND", "acct:42", "2"},
	"quota.reset":        {"QUOTA.RESET", "acct:42"},
	"rl.check":           {"RL.CHECK", "api", "COST", "2", "DESCRIPTOR", "user", "u1", "DESCRIPTOR", "endpoint", "/x"},
	"rl.checkall":        {"RL.CHECKALL", "COST", "1", "LIMIT", "{a}1", "GCRA", "1", "2", "3", "LIMIT", "{a}2", "QUOTA", "5", "day", "TZ", "UTC"},
	"rl.shouldratelimit": {"RL.SHOULDRATELIMIT", "api", "1", "1", "-", "-", "-", "user", "u1", "2", "3", "10", "minute", "endpoint", "/x", "user", "u1"},
	"rl.reserve":         {"RL.RESERVE", "api", "r1", "30", "COST", "2", "DESCRIPTOR", "user", "u1"},
	"rl.lease":           {"RL.LEASE", "api", "h1", "10", "WANT", "5", "DESCRIPTOR", "user", "u1"},
	"rl.share":           {"RL.SHARE", "api", "h1", "10", "USED", "3", "ASKED", "20", "OVER", "1", "DESCRIPTOR", "tenant", "a"},
	"gcra":               {"GCRA", "k", "10", "5", "1", "TOKENS", "2"},
	"rl.settle":          {"RL.SETTLE", "api", "r1", "1"},
	"rl.cancel":          {"RL.CANCEL", "api", "r1"},
	"rl.part":            {"RL.PART", "RESERVE", "none", "p1", "30", "RL.CHECK", "api", "COST", "2", "DESCRIPTOR", "user", "u1"},
	"rl.rules":           {"RL.RULES", "LOAD", "f.yaml", "domain: d\ndescriptors:\n  - key: u\n    rate_limit: {unit: second, requests_per_unit: 2}\n"},
	"rl.override":        {"RL.OVERRIDE", "SET", "api", "5", "minute", "BURST", "2", "START", "1", "UNTIL", "8000000000", "DESCRIPTOR", "user", "u1"},
	"rl.scale":           {"RL.SCALE", "SET", "api", "0.5", "RECOVER", "30"},
	"del":                {"DEL", "a", "b"},
	"unlink":             {"UNLINK", "a"},
	"exists":             {"EXISTS", "a", "b"},
	"ttl":                {"TTL", "a"},
	"pttl":               {"PTTL", "a"},
	"type":               {"TYPE", "a"},
	"get":                {"GET", "user123"},
	"dbsize":             {"DBSIZE"},
	"flushall":           {"FLUSHALL", "SYNC"},
	"flushdb":            {"FLUSHDB"},
	"debug":              {"DEBUG", "APPLY-PANIC", "k"},
	"sluice.own":         {"SLUICE.OWN", "1", "0-8191", "8192-16383"},
	"sluice.import":      {"SLUICE.IMPORT", "2", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4", "", "0-9"},
	"sluice.cut":         {"SLUICE.CUT", "j1", "2", "0-9"},
	"sluice.config":      {"SLUICE.CONFIG", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4", ""},
	"sluice.moved":       {"SLUICE.MOVED", "j1", "3", "120"},
	"sluice.job":         {"SLUICE.JOB", "ADD", "j1", "g2", "a", "b", "0-99"},
	"sluice.groups":      {"SLUICE.GROUPS", "ADD", "g3", "c1=127.0.0.1:7007@127.0.0.1:17007"},
	"sluice.level":       {"SLUICE.LEVEL", "1"},
	"exec":               {"EXEC", "1", "w", "-", "5", "CL.THROTTLE", "k", "1", "1", "1", "3", "DEL", "w", "k"},
}

func TestExamplesCoverEveryCommand(t *testing.T) {
	m := New(Options{})
	for _, c := range m.Commands() {
		ex, ok := examples[c.Name]
		if !ok {
			t.Errorf("no example of %s: add one to examples", c.Name)
			continue
		}
		if bad := m.Check(words(ex...)); bad != "" {
			t.Errorf("%q: check says %q", ex, bad)
		}
	}
}

// readmeCommands are the commands the README shows run with redis-cli.
func readmeCommands(t testing.TB) [][]string {
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "$ redis-cli ")
		if !ok {
			continue
		}
		line, _, _ = strings.Cut(line, "#")
		out = append(out, strings.Fields(line))
	}
	return out
}

// encodeFuzz joins commands as the fuzzer's input: arguments separated by
// 0x00, commands by 0x01.
func encodeFuzz(cmds ...[]string) []byte {
	var b []byte
	for i, c := range cmds {
		if i > 0 {
			b = append(b, 1)
		}
		b = append(b, strings.Join(c, "\x00")...)
	}
	return b
}

// decodeFuzz is encodeFuzz's inverse, at most 16 commands of at most 64
// arguments.
func decodeFuzz(data []byte) [][][]byte {
	var cmds [][][]byte
	for _, line := range bytes.Split(data, []byte{1}) {
		if len(cmds) == 16 {
			break
		}
		args := bytes.Split(line, []byte{0})
		if len(args) > 64 {
			args = args[:64]
		}
		if len(args[0]) == 0 {
			continue
		}
		cmds = append(cmds, args)
	}
	return cmds
}

// FuzzApplyArgs drives a machine through ApplyArgs with random commands:
// every reply is one well-formed RESP2 value; a command Check calls
// malformed answers exactly Check's error; and no apply panics (the
// boundary would turn a panic into an internal error, which is a bug for
// every command but DEBUG APPLY-PANIC). A second machine fed the same
// commands ends with the same digest.
func FuzzApplyArgs(f *testing.F) {
	for _, c := range readmeCommands(f) {
		f.Add(encodeFuzz(c))
	}
	for _, ex := range examples {
		f.Add(encodeFuzz(ex))
	}
	src, err := os.ReadFile("testdata/api.yaml")
	if err != nil {
		f.Fatal(err)
	}
	load := []string{"RL.RULES", "LOAD", "api.yaml", string(src)}
	f.Add(encodeFuzz(load, examples["rl.check"], examples["rl.override"], examples["rl.check"], []string{"RL.OVERRIDE", "LIST", "api"}))
	f.Add(encodeFuzz(examples["quota.check"], examples["quota.refund"], examples["flushall"], examples["quota.get"]))
	f.Add(encodeFuzz([]string{"RL.RULES", "LIST"}, []string{"RL.RULES", "CLEAR"}, []string{"RL.SCALE", "GET", "api"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := New(Options{}), New(Options{})
		var w resp.Writer
		for i, args := range decodeFuzz(data) {
			now := t0 + int64(i)*1_700_000_000
			bad := a.Check(args)
			w.Buf = w.Buf[:0]
			a.ApplyArgs(now, args, &w)
			if n, err := respValueLen(w.Buf, 0); err != "" || n != len(w.Buf) {
				t.Fatalf("%q: reply %q is not one RESP2 value (%s)", args, w.Buf, err)
			}
			if bad != "" && string(w.Buf) != "-"+bad+"\r\n" {
				t.Fatalf("%q: check says %q, apply %q", args, bad, w.Buf)
			}
			if bytes.HasPrefix(w.Buf, []byte("-"+internalErrorPrefix)) && !resp.EqualFold(args[0], "debug") {
				t.Fatalf("%q: the apply panicked: %q", args, w.Buf)
			}
			var wb resp.Writer
			b.ApplyArgs(now, args, &wb)
			if !bytes.Equal(w.Buf, wb.Buf) {
				t.Fatalf("%q: replies differ: %q / %q", args, w.Buf, wb.Buf)
			}
		}
		da, err := a.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if db, _ := b.Digest(); da != db {
			t.Fatalf("digests differ: %s / %s", da, db)
		}
	})
}

// respValueLen is the length of the RESP2 value at the start of b, or an
// error text.
func respValueLen(b []byte, depth int) (int, string) {
	if depth > 8 {
		return 0, "too deep"
	}
	end := bytes.Index(b, []byte("\r\n"))
	if len(b) == 0 || end < 0 {
		return 0, "no line"
	}
	line := string(b[1:end])
	switch b[0] {
	case '+', '-':
		return end + 2, ""
	case ':':
		if _, err := strconv.ParseInt(line, 10, 64); err != nil {
			return 0, "bad integer"
		}
		return end + 2, ""
	case '$':
		n, err := strconv.Atoi(line)
		if err != nil || n < -1 {
			return 0, "bad length"
		}
		if n == -1 {
			return end + 2, ""
		}
		if len(b) < end+2+n+2 || string(b[end+2+n:end+4+n]) != "\r\n" {
			return 0, "short bulk"
		}
		return end + 4 + n, ""
	case '*':
		n, err := strconv.Atoi(line)
		if err != nil || n < -1 {
			return 0, "bad count"
		}
		at := end + 2
		for range max(n, 0) {
			k, bad := respValueLen(b[at:], depth+1)
			if bad != "" {
				return 0, bad
			}
			at += k
		}
		return at, ""
	}
	return 0, "unknown type " + strconv.Quote(string(b[:1]))
}

// Malformed versions of every command: Check refuses each with exactly the
// error its apply gives, on a machine holding state.
func TestCheckMatchesApply(t *testing.T) {
	m := New(Options{})
	loadAPI(t, m)
	for _, ex := range examples {
		do(m, t0, ex...)
	}
	malformed := [][]string{
		{"CL.THROTTLE", "k", "x", "1", "1"}, {"CL.THROTTLE", "k", "1", "0", "1"}, {"CL.THROTTLE", "k", "1", "1", "1", "1", "1"},
		{"CL.THROTTLE", "k", "-1", "1", "1"}, {"CL.THROTTLE", "k", "1", "1", "99999999999"},
		{"SW.CHECK", "k", "0", "60"}, {"SW.CHECK", "k", "10", "60", "COST"}, {"SW.CHECK", "k", "10", "60", "NOPE"},
		{"SW.CHECK", "k", "1000000", "60", "EXACT"}, {"SW.CHECK", "k", "10", "60", "EXACT", "EXACT"},
		{"FW.CHECK", "k", "10", "60", "EXACT"}, {"FW.CHECK", "k", "10", "0"}, {"FW.CHECK", "k", "10", "60", "COST", "-1"},
		{"CONC.ACQUIRE", "c", "0", "30", "r"}, {"CONC.ACQUIRE", "c", "1", "0", "r"}, {"CONC.ACQUIRE", "c", "1", "30", strings.Repeat("r", 300)},
		{"CONC.RELEASE", "c", strings.Repeat("r", 300)}, {"CONC.RENEW", "c", "r", "x"}, {"CONC.RENEW", "c", "r", "-5"},
		{"QUOTA.CHECK", "q", "-1", "DAY"}, {"QUOTA.CHECK", "q", "1", "FORTNIGHT"}, {"QUOTA.CHECK", "q", "1", "DAY", "TZ", "Mars/Base"},
		{"QUOTA.CHECK", "q", "1", "DAY", "ANCHOR", "99999999999999"}, {"QUOTA.CHECK", "q", "1", "DAY", "COST"},
		{"QUOTA.CHECK", "q", "1", "DAY", "COST", "1", "COST", "2"}, {"QUOTA.REFUND", "q", "-1"}, {"QUOTA.REFUND", "q", "x"},
		{"RL.CHECK", "api", "user", "u"}, {"RL.CHECK", "api", "COST", "-1", "DESCRIPTOR", "u", "v"},
		{"RL.CHECK", "api", "DESCRIPTOR", "u"}, {"RL.CHECK", "api", "DESCRIPTOR", "DESCRIPTOR", "u", "v"},
		{"RL.CHECKALL", "LIMIT", "a", "GCRA", "1", "2"}, {"RL.CHECKALL", "LIMIT", "a", "NOPE", "1"},
		{"RL.CHECKALL", "LIMIT", "a", "FIXED", "1", "60", "LIMIT", "b", "FIXED", "1", "60"},
		{"RL.CHECKALL", "COST", "x", "LIMIT", "a", "FIXED", "1", "60"}, {"RL.CHECKALL", "LIMIT", "a", "QUOTA", "1", "day", "TZ"},
		{"RL.RULES", "LOAD", "f.yaml"}, {"RL.RULES", "LOAD", "f.yaml", "domain: [", "g.yaml"}, {"RL.RULES", "LOAD", "f.yaml", "domain: ["},
		{"RL.RULES", "CLEAR", "x", "y"}, {"RL.RULES", "LIST", "a", "b"}, {"RL.RULES", "NOPE"},
		{"RL.OVERRIDE", "SET", "api", "0", "minute", "DESCRIPTOR", "u", "v"}, {"RL.OVERRIDE", "SET", "api", "1", "fortnight", "DESCRIPTOR", "u", "v"},
		{"RL.OVERRIDE", "SET", "api", "1", "minute", "START", "5", "UNTIL", "4", "DESCRIPTOR", "u", "v"},
		{"RL.OVERRIDE", "SET", "api", "1", "minute", "DESCRIPTOR", "u", "v", "DESCRIPTOR", "w", "x"},
		{"RL.OVERRIDE", "SET", "api", "1"}, {"RL.OVERRIDE", "DEL", "api"}, {"RL.OVERRIDE", "LIST", "api", "x"}, {"RL.OVERRIDE", "NOPE", "api"},
		{"RL.SCALE", "SET", "api", "2"}, {"RL.SCALE", "SET", "api", "0.5", "RECOVER", "-1"}, {"RL.SCALE", "SET", "api"},
		{"RL.SCALE", "GET", "api", "x"}, {"RL.SCALE", "NOPE", "api"},
		{"FLUSHALL", "NOW"}, {"FLUSHDB", "SYNC", "ASYNC"}, {"DEBUG", "NOPE", "k"},
		{"NOSUCH", "k"}, {"GET"}, {"TTL", "a", "b"}, {"CONC.GET"},
	}
	for _, c := range malformed {
		args := words(c...)
		bad := m.Check(args)
		if bad == "" {
			t.Errorf("%q: check passes a malformed command", c)
			continue
		}
		if got := do(m, t0+1, c...); got != "-"+bad+"\r\n" {
			t.Errorf("%q: check says %q, apply %q", c, bad, got)
		}
	}
}
