package tests

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// respValue reads one RESP2 reply and renders it for comparison; the
// durations of a limiter reply (its last two integers: retry_after and
// reset_after, which depend on when each server read its clock) are left
// out, so a one node and a cluster that decide alike render alike.
func respValue(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch line[0] {
	case '+', '-', ':':
		return line, nil
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "$nil", nil
		}
		b := make([]byte, n+2)
		if _, err := readFull(r, b); err != nil {
			return "", err
		}
		return "$" + string(b[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		var parts []string
		for range max(n, 0) {
			p, err := respValue(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		if n == 5 && allInts(parts) {
			parts = parts[:3] // [limited, limit, remaining]; durations vary
		}
		return "[" + strings.Join(parts, " ") + "]", nil
	}
	return "", fmt.Errorf("bad reply line %q", line)
}

func allInts(parts []string) bool {
	for _, p := range parts {
		if !strings.HasPrefix(p, ":") {
			return false
		}
	}
	return true
}

func readFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// pipe sends a pipeline on conn and renders its n replies.
func pipe(t *testing.T, conn net.Conn, r *bufio.Reader, cmds []string) []string {
	t.Helper()
	var req strings.Builder
	for _, c := range cmds {
		req.WriteString(c + "\r\n")
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(req.String())); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(cmds))
	for i := range cmds {
		v, err := respValue(r)
		if err != nil {
			t.Fatalf("reply %d of %q: %v", i, cmds, err)
		}
		out[i] = v
	}
	return out
}

// sameDurationsAside compares two replies (respValue's form) token by
// token, letting integers of a minute or more (the durations of these
// hour-long limits, in seconds; counts here are single digits) differ by
// one: the two servers answer a few milliseconds apart, and a duration
// rounded to seconds may fall on either side of a boundary.
func sameDurationsAside(a, b string) bool {
	if a == b {
		return true
	}
	ta, tb := strings.Fields(a), strings.Fields(b)
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		if ta[i] == tb[i] {
			continue
		}
		x, errx := strconv.ParseInt(strings.Trim(ta[i], ":[]"), 10, 64)
		y, erry := strconv.ParseInt(strings.Trim(tb[i], ":[]"), 10, 64)
		if errx != nil || erry != nil || min(x, y) < 60 || max(x-y, y-x) > 1 {
			return false
		}
	}
	return true
}

// The same random command stream — limiters, reads, deletes, flushes,
// surface commands, malformed commands — sent as random pipelines to one
// node and to a 3-node cluster's leader gets the same replies (durations
// aside): a replicated node has one node's semantics.
func TestClusterAnswersAsOneNode(t *testing.T) {
	single := StartServer(t)
	cl := StartCluster(t, 3, nil)
	leader := cl.Leader()
	dial := func(addr string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	sc, sr := dial(single.Addr)
	lc, lr := dial(leader.Addr)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	key := func() string { return fmt.Sprintf("{c}k%d", rng.IntN(8)) }
	vocabulary := []func() string{
		func() string { return fmt.Sprintf("CL.THROTTLE %s %d 1 3600", key(), rng.IntN(4)) },
		func() string { return fmt.Sprintf("CL.THROTTLE %s 3 1 3600 %d", key(), rng.IntN(3)) },
		func() string { return fmt.Sprintf("SW.CHECK %s %d 3600", key(), 1+rng.IntN(4)) },
		func() string { return fmt.Sprintf("SW.CHECK %s 3 3600 EXACT", key()) },
		func() string { return fmt.Sprintf("CONC.ACQUIRE %s 2 3600 r%d", key(), rng.IntN(3)) },
		func() string { return fmt.Sprintf("CONC.RELEASE %s r%d", key(), rng.IntN(3)) },
		func() string {
			return fmt.Sprintf("RL.CHECKALL LIMIT %s GCRA 2 1 3600 LIMIT %s SLIDING 3 3600", key(), key())
		},
		func() string { return "TYPE " + key() },
		func() string { return "EXISTS " + key() + " " + key() },
		func() string { return "DEL " + key() },
		func() string { return "KEYS *" },
		func() string { return "DBSIZE" },
		func() string { return "SCAN 0 COUNT 1000" },
		func() string { return "PING" },
		func() string { return "CL.THROTTLE " + key() + " x 1 1" },
		func() string { return "NOSUCH " + key() },
		func() string { return "FLUSHALL" },
	}
	for round := range 80 {
		n := 1 + rng.IntN(12)
		cmds := make([]string, n)
		for i := range cmds {
			w := rng.IntN(len(vocabulary))
			if w == len(vocabulary)-1 && rng.IntN(4) != 0 {
				w = 0 // FLUSHALL now and then, not a sixteenth of the time
			}
			cmds[i] = vocabulary[w]()
		}
		want := pipe(t, sc, sr, cmds)
		got := pipe(t, lc, lr, cmds)
		for i := range cmds {
			if !sameDurationsAside(got[i], want[i]) {
				t.Fatalf("round %d, command %d %q:\n cluster  %s\n one node %s\n(pipeline %q)", round, i, cmds[i], got[i], want[i], cmds)
			}
		}
	}
	cl.SameDigests()
}
